"""The dashboard's read models: plain frozen values a template renders, nothing to query.

Times are aware UTC datetimes; money is USD as ``float | None`` and tokens ``int | None``,
where ``None`` means nobody reported it (unknown, never zero). Every page's value carries
``last_event_id``, the newest event the page was built from, so a live page asks the event
stream only for what came after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from assay.core.usage import Spend


class SeatState(StrEnum):
    """How one seat of an attempt stands, as a page says it."""

    RUNNING = "running"
    VIABLE = "viable"
    NOT_VIABLE = "not viable"
    LOST_TO_QUOTA = "lost to quota"
    INTERRUPTED = "interrupted"  # started, never finished, and the run is closed


class AttemptState(StrEnum):
    """How one attempt stands: still running, or the outcome it was decided with."""

    RUNNING = "running"
    PASS = "pass"
    WARN = "warn"
    BLOCKED = "blocked"
    ERROR = "error"
    INTERRUPTED = "interrupted"  # started, never decided, and the run is closed


class ReportMark(StrEnum):
    """A file of the coder's report compared with the diff read from disk."""

    OK = "ok"
    CLAIMED_BUT_MISSING = "claimed_but_missing"
    UNCLAIMED_BUT_PRESENT = "unclaimed_but_present"


UNREADABLE_STATUS = "unreadable"
"""The status shown for a task row that is not a valid task (edited by hand, a newer version)."""


@dataclass(frozen=True)
class RunBrief:
    """A run as a list shows it; the settle fields are None while it is open."""

    run_id: str
    task_id: str
    status: str
    open: bool
    started_at: datetime
    finished_at: datetime | None
    settle_row: str | None
    attempt_spent: bool | None
    task_status: str | None
    reason: str | None


@dataclass(frozen=True)
class QueueRow:
    """One task of the queue. ``status`` is ``unreadable`` (and ``problem`` says why) for a row
    that is not a valid task; budgets are None when its stored contract cannot be read."""

    task_id: str
    title: str
    status: str
    problem: str | None
    attempts_spent: int
    max_attempts: int | None
    attempts_remaining: int | None
    refund_streak: int
    max_refunds: int | None
    hold_reason: str | None
    hold_source: str | None
    not_before: datetime | None
    updated_at: datetime
    last_run: RunBrief | None
    last_error: str | None = None
    created_at: datetime | None = None
    held_by: str | None = None  # a held task's holder (assay.web.held_by)
    cost_usd: float = 0.0  # the known cost (a lower bound when cost_unknown)
    cost_unknown: int = 0  # dispatches whose cost is unknown
    run_seconds: float = 0.0  # the closed runs' time (an open run's is added when shown)

    def run_time_ms(self, now: datetime) -> int | None:
        """The time its runs took, an open last run's up to ``now``; None: never run."""
        if self.last_run is None and not self.run_seconds:
            return None
        running = 0.0
        if self.last_run is not None and self.last_run.open:
            running = max(0.0, (now - self.last_run.started_at).total_seconds())
        return int((self.run_seconds + running) * 1000)


@dataclass(frozen=True)
class QueuePage:
    """One page of the queue. ``counts`` has every status present plus ``all``; ``total`` is
    the number of tasks matching the view (its status and filters); ``needs_you`` the held
    and failed tasks."""

    rows: list[QueueRow]
    counts: dict[str, int]
    status: str | None
    page: int
    per_page: int
    total: int
    pages: int
    last_event_id: int
    needs_you: int = 0


@dataclass(frozen=True)
class ActionView:
    """An operator's move on a task (hold, release, cancel) or a halt re-arm, from the log."""

    at: datetime
    action: str
    by: str
    via: str
    reason: str | None
    run_id: str | None = None


@dataclass(frozen=True)
class TaskView:
    """A task's page: its row, its instruction, its runs newest first, the operators' moves,
    and what its runs spent as the usage journal sums it (``usage`` None: nothing journaled;
    ``run_usage`` by run id, for the runs that journaled)."""

    row: QueueRow
    instruction: str
    last_error: str | None
    diagnostic: str | None
    runs: list[RunBrief]
    actions: list[ActionView]
    usage: Spend | None
    run_usage: dict[str, Spend]
    last_event_id: int


@dataclass(frozen=True)
class SeatView:
    """One seat of one attempt: who coded, what it touched and cost, whether it was chosen."""

    attempt: int
    seat: int
    coder: str
    label: str | None
    state: str
    error: str | None
    files: list[str]
    tokens: int | None
    cost_usd: float | None
    wall_time_ms: int | None
    stop_reason: str | None
    chosen: bool
    log: str | None = None  # the name of its coder's log in the ledger (None: none kept)
    started_at: datetime | None = None  # its dispatch.started event
    live: LiveSeat | None = None  # what its coder did so far, while it runs


@dataclass(frozen=True)
class LiveSeat:
    """What a running seat's coder did so far: ``reports`` how many times its program reported
    usage (its turns, as far as they are known); ``tokens`` and ``cost_usd`` the sums of
    those reports (None: unknown); ``tail`` the last lines of its log the ledger keeps ("":
    none kept yet), ``log_updated_at`` when that copy was shipped."""

    reports: int
    tokens: int | None
    cost_usd: float | None
    tail: str
    log_updated_at: datetime | None


@dataclass(frozen=True)
class ValidatorView:
    """One validator's verdict on a seat's candidate, with the tail of its output."""

    attempt: int
    seat: int
    validator_id: str
    severity: str
    error: bool
    justification: str
    findings: list[str]
    log: str | None = None  # the name of its full log in the ledger (None: none kept)


@dataclass(frozen=True)
class JudgeView:
    """One judge's answer in one round (0: its ranking; later: a deliberation): its ranking,
    best first (None: none usable), and its reasons (untrusted: a model shown coders' work)."""

    judge: int
    name: str
    round: int
    ranking: list[str] | None
    reasons: str
    reasons_cut: int  # characters the run did not keep (they are in the judge's log)
    error: str | None


@dataclass(frozen=True)
class TallyView:
    """The judges' blind tally of one attempt: ``votes`` are first choices per label,
    ``borda`` the Borda points (they break a tie on first choices), ``judges`` each judge's
    answer per round (``deliberated``: a second round was asked)."""

    attempt: int
    winner: str | None
    present: int
    quorum: int
    met: bool
    votes: list[tuple[str, int]] = field(default_factory=list)
    borda: list[tuple[str, int]] = field(default_factory=list)
    tie_break: str | None = None
    judges: list[JudgeView] = field(default_factory=list)

    @property
    def deliberated(self) -> bool:
        return any(j.round > 0 for j in self.judges)


@dataclass(frozen=True)
class AttemptView:
    """One attempt of a run's timeline: its seats, validators, tally and decision."""

    attempt: int
    state: str
    started_at: datetime | None
    decided_at: datetime | None
    seats: list[SeatView]
    validators: list[ValidatorView]
    tally: TallyView | None
    action: str | None
    next: str | None
    why: str | None
    failures: list[str]


@dataclass(frozen=True)
class ReportFile:
    path: str
    mark: str


@dataclass(frozen=True)
class ReportView:
    """The chosen candidate's coder report: evidence, never a verdict."""

    summary: str | None
    files: list[ReportFile]
    stop_reason: str | None
    turns_used: int | None
    tokens_used: int | None
    cost_usd: float | None


@dataclass(frozen=True)
class HaltView:
    """One halt of a run's dispatch. ``lifecycle`` None: unknown here (no state file or
    document); ``rearm_command`` is the exact CLI, only for a FIRED halt; ``rearmable_here``:
    its state file is on this machine, so the page's re-arm form can act."""

    dispatch_id: str
    name: str
    severity: str
    lifecycle: str | None
    detail: str
    fired_at: str | None
    history: list[dict[str, Any]]
    rearm_command: str | None
    rearmable_here: bool


@dataclass(frozen=True)
class Totals:
    """What a run's dispatches spent; None where any dispatch did not say (unknown, not 0)."""

    tokens: int | None
    cost_usd: float | None
    wall_time_ms: int | None


@dataclass(frozen=True)
class RunView:
    """A run's page: its timeline (oldest attempt first), what it spent, the chosen candidate's
    report, files and diff, its halts, and how it landed. ``usage`` is the journal's sum of its
    dispatches (None: nothing journaled, ``totals`` are the seats')."""

    run: RunBrief
    title: str
    attempts: list[AttemptView]
    totals: Totals
    coder_report: ReportView | None
    changed_files: list[str]
    diff: str | None
    diff_truncated: bool
    halts: list[HaltView]
    warnings: list[str]
    land: dict[str, Any] | None
    sandbox: str | None
    payload_available: bool
    usage: Spend | None
    last_event_id: int
    logs: list[Any] = field(default_factory=list)  # the ledger's LogEntry listing, by name


@dataclass(frozen=True)
class FiredHaltRow:
    """A halt that fired and is not re-armed, with the task and run it stops."""

    task_id: str
    task_status: str | None
    run_id: str
    halt: HaltView
    task_title: str | None = None  # untrusted text (whoever queued the task wrote it)


@dataclass(frozen=True)
class HaltsPage:
    rows: list[FiredHaltRow]
    page: int
    per_page: int
    total: int
    pages: int
    last_event_id: int
