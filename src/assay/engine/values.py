"""The values that cross the effect boundary: the run's plan, its events, and what a seat, a
validation, a judging and a landing came to.

These are small serialisable values (frozen dataclasses of core types): a Temporal workflow's
history holds them, so none carries a diff, a path of the worker's disk or an adapter's type.
The worker that holds a run's seats keeps the rest (the diff, the seat's repository, the
coder's log) and reads it there when a judge or the lander needs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pydantic import JsonValue

from assay.core.changes import TypeChange
from assay.core.contract import Contract
from assay.core.quota import Quota
from assay.core.report import CoderReport, DiffComparison
from assay.core.results import ValidatorResult
from assay.core.tally import Tally
from assay.core.vocab import CanonicalHalt, EventKind, RunStatus, StopReason


@dataclass(frozen=True)
class RunPlan:
    """What a run is about; fixed when the run opens, before the graph starts.

    ``repo_root`` is the repository on the worker that opened the run (the one holding its
    seats): only that worker reads it. ``origin``: the remote the run started from and lands
    on (``base_branch`` is then that remote's branch), or None to land in ``repo_root``."""

    task_id: str
    run_id: str
    dispatch_id: str
    contract: Contract
    repo_root: Path
    base_commit: str
    base_branch: str | None
    origin: str | None = None


@dataclass(frozen=True)
class DispatchSummary:
    """What could be seen of one coder's dispatch, without its log or its report file."""

    exit_code: int | None
    stop_reason: StopReason | None = None
    tokens_used: int | None = None
    cost_usd: float | None = None
    turns_used: int | None = None
    wall_time_ms: int = 0
    timed_out: bool = False
    quota: Quota | None = None
    fault: str | None = None  # the provider fault that lost the seat (not quota), named
    environment_error: str | None = None
    # A setting the operator controls kept the coder from running here (its program, its key).
    setting_error: str | None = None
    error: str | None = None  # a crash or provider fault in words, for the recovery spec
    # A spending budget of its run or task was spent while it ran: the figures, in words.
    budget: str | None = None


@dataclass(frozen=True)
class Candidate:
    """One seat's dispatch in one attempt: its change as statistics and file list, never the
    diff (that stays on the worker, in the seat's repository, under ``commit``)."""

    seat: int
    attempt: int
    coder: str
    dispatch: DispatchSummary
    commit: str | None = None  # the candidate's checkpoint commit in its seat
    files: list[str] = field(default_factory=list)  # every path it changed, sorted
    type_changes: list[TypeChange] = field(default_factory=list)
    insertions: int = 0
    deletions: int = 0
    report: CoderReport | None = None
    comparison: DiffComparison = field(default_factory=DiffComparison)
    # What the coder wrote that the repository's .gitignore files keep out of the candidate
    # (the first ones, and how many in all): named, never silently dropped.
    ignored: list[str] = field(default_factory=list)
    ignored_count: int = 0

    @property
    def empty(self) -> bool:
        """The seat left the tree unchanged."""
        return not self.files

    @property
    def lost_to_quota(self) -> bool:
        return self.dispatch.quota is not None

    @property
    def lost_to_provider_fault(self) -> bool:
        """The provider failed the coder (not quota): a machine fact, never a task failure."""
        return self.dispatch.fault is not None and not self.lost_to_quota

    @property
    def environment_error(self) -> str | None:
        return self.dispatch.environment_error

    @property
    def lost_to_setting(self) -> bool:
        """This machine cannot run the seat's coder as set (a program missing, a key unset):
        the operator's to fix, so the run ends and the task is held, never retried."""
        return self.dispatch.setting_error is not None

    @property
    def lost_to_machine(self) -> bool:
        """Lost to quota, a provider fault or the environment: nothing said about the task."""
        environment = self.environment_error is not None
        return self.lost_to_quota or self.lost_to_provider_fault or environment

    @property
    def viable(self) -> bool:
        """A candidate the validators can judge: it ran, was not lost, and changed something."""
        return not self.lost_to_machine and not self.lost_to_setting and not self.empty


@dataclass(frozen=True)
class Validation:
    """One validator's verdict on a candidate, as the graph needs it (never a secret's value:
    what the secret scan found stays on the worker, for redaction)."""

    result: ValidatorResult
    fire: CanonicalHalt | None = None  # a canonical halt the engine must fire
    evidence: str | None = None  # the evidence to fire it with
    quota: Quota | None = None  # a model judge lost to a rate or usage limit
    fault: str | None = None  # a model judge lost to a provider fault (5xx, 529, connection)
    setting_error: str | None = None  # a model judge kept from running by the operator's setting


@dataclass(frozen=True)
class LandOutcome:
    status: RunStatus  # merged or ready; blocked when a blocked run left its branch or PR
    detail: str
    branch: str | None = None
    left_pr: bool = False
    pr_url: str | None = None
    validations: int = 0  # validations of a combined tree, when the base branch had moved
    # The landing failed on the machine (GitHub 5xx, a timeout, the network): land again later.
    machine_fault: bool = False
    # The landing was refused (401, 403, a setting missing): a human must resolve it.
    refused: bool = False
    refusal: str = "the pull request was refused"  # what refused it, in words


MAX_JUDGE_REASONS = 20_000
"""A judge's reasons kept with the run, in characters: the rest is counted (``reasons_cut``)
and stays in the judge's log. A judge is a model shown what coders wrote: its text is theirs
to steer, so it is bounded like theirs."""


@dataclass(frozen=True)
class JudgeSaid:
    """One judge's answer in one round (0: its ranking; 1 on: a deliberation, after it saw the
    others' reasons): its ranking (labels, best first; None: none usable) and its reasons."""

    judge: int  # 1-based, as the problems name it
    name: str  # its kind and model
    round: int
    ranking: list[str] | None
    reasons: str = ""
    reasons_cut: int = 0  # characters of its reasons not kept here
    error: str | None = None

    @classmethod
    def of(
        cls, judge: int, name: str, round_: int, ranking: list[str] | None, reasons: str,
        error: str | None,
    ) -> JudgeSaid:  # fmt: skip
        kept = reasons[:MAX_JUDGE_REASONS]
        return cls(judge, name, round_, ranking, kept, len(reasons) - len(kept), error)


@dataclass(frozen=True)
class JudgeRound:
    """What the blind judges of one attempt said, tallied; ``said``: each judge's answer in
    each round it was asked (none for a judge never asked, as one of no ``judge:``)."""

    tally: Tally
    labels: dict[int, str]  # seat -> blind label
    calls: int  # rank and deliberation calls made
    lost_to_quota: int = 0  # judges whose provider refused them
    quota_reset_at: datetime | None = None
    lost_to_fault: int = 0  # judges whose provider failed after retries (5xx, 529, connection)
    # Judges that gave no usable ranking, each named with why ("judge 1 (llm gpt-5-mini): …").
    problems: tuple[str, ...] = ()
    # The run's spending budget, spent by the judges (its figures): the run stops, held.
    budget: str | None = None
    # Judges a setting the operator controls kept from running (named, with the problem).
    setting_errors: tuple[str, ...] = ()
    said: tuple[JudgeSaid, ...] = ()


@dataclass(frozen=True)
class RunEvent:
    """Progress, for the live display and the ledger's event log (stored as it is: JSON).

    ``run_id`` names the run an event of the graph belongs to (an executor that serves many
    runs routes it by that); the local executor's own events leave it empty."""

    kind: EventKind
    data: dict[str, JsonValue] = field(default_factory=dict)
    run_id: str = ""
