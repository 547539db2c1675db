"""What goes into and comes out of the SQL ledger, as pydantic models.

``RunClose`` is everything the close of a run writes, gathered in one value so the store can
write it in one transaction. Its stage increments are derived from its own records (never
passed alongside them), and its validator refuses a close whose parts disagree: counters are
exact, so a mismatch is a caller bug to surface, not a number to pick between.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, JsonValue, model_validator

from assay.core.attempts import AttemptRecord
from assay.core.settle import Settlement
from assay.core.tasks import Task
from assay.core.vocab import EventKind, RunStatus, SettleRow, Stage, StopReason, TaskStatus


class DispatchRecord(BaseModel):
    """One coder invocation: which attempt and seat, what it produced, what it cost."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dispatch_id: str = Field(min_length=1, max_length=200)
    attempt: int = Field(ge=1)
    seat: int = Field(ge=0)
    coder: str = Field(min_length=1)
    label: str | None = None
    viable: bool = False
    lost_to_quota: bool = False
    stop_reason: StopReason | None = None
    files_changed: int = Field(default=0, ge=0)
    tokens_used: int | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)
    wall_time_ms: int | None = Field(default=None, ge=0)


class EventIn(BaseModel):
    """An event a caller asks to append; the store stamps id, time, task and run.

    ``kind`` must be an :class:`EventKind`: the log has one closed vocabulary, so a misspelt
    kind is refused when written instead of silently missed by every reader.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: EventKind
    data: dict[str, JsonValue] = Field(default_factory=dict)


DIFF_LIMIT = 512 * 1024
"""The most of a chosen candidate's diff the ledger keeps (characters); the rest is cut."""


class RunDocument(BaseModel):
    """What the ledger keeps of a closed run for a reader on any machine (the dashboard).

    ``payload`` is the payload document as written to ``payload.json``; ``diff`` the chosen
    candidate's diff, at most :data:`DIFF_LIMIT` characters (``diff_truncated`` says it was
    cut); ``halt_states`` the dispatch's halt state file as it stood when the run closed.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    payload: dict[str, JsonValue]
    diff: str | None = None
    diff_truncated: bool = False
    halt_states: dict[str, JsonValue] | None = None

    @classmethod
    def build(
        cls,
        payload: dict[str, JsonValue],
        *,
        diff: str | None = None,
        halt_states: dict[str, JsonValue] | None = None,
    ) -> RunDocument:
        """The document with ``diff`` cut at :data:`DIFF_LIMIT` (at a line's end when one is
        near), so one huge change cannot bloat the ledger."""
        if diff is None or len(diff) <= DIFF_LIMIT:
            return cls(payload=payload, diff=diff, halt_states=halt_states)
        cut = diff[:DIFF_LIMIT]
        line_end = cut.rfind("\n")
        kept = cut[: line_end + 1] if line_end > DIFF_LIMIT // 2 else cut
        return cls(payload=payload, diff=kept, diff_truncated=True, halt_states=halt_states)


class RunClose(BaseModel):
    """The close of one run: its records, the task as settle left it, and the payload path.

    ``task`` is the task *after* ``settle``; ``settlement`` is what settle returned. The task's
    spent attempts are written from ``task.attempts``, and checked against ``settlement`` and
    the ledger (see ``Ledger.close_run``).
    """

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(min_length=1, max_length=200)
    status: RunStatus
    task: Task
    settlement: Settlement
    reason: str | None = None
    attempts: list[AttemptRecord] = Field(default_factory=list)
    dispatches: list[DispatchRecord] = Field(default_factory=list)
    judge_calls: int = Field(default=0, ge=0)
    land_attempts: int = Field(default=0, ge=0)
    payload_path: str | None = None
    finished_at: AwareDatetime
    events: list[EventIn] = Field(default_factory=list)
    document: RunDocument | None = None
    # What the run spent, summed from the usage journal (the payload's ``usage``), for the
    # ``run.closed`` event.
    usage: dict[str, Any] | None = None

    @property
    def task_id(self) -> str:
        return self.task.id

    @model_validator(mode="after")
    def _consistent(self) -> RunClose:
        if self.task.status is not self.settlement.new_status:
            raise ValueError(
                f"task is {self.task.status} but settle said {self.settlement.new_status}"
            )
        numbers = sorted(a.attempt for a in self.attempts)
        if numbers != list(range(1, len(numbers) + 1)):
            raise ValueError(f"attempts must be numbered 1..n without gaps, got {numbers}")
        ids = Counter(d.dispatch_id for d in self.dispatches)
        if repeated := sorted(i for i, n in ids.items() if n > 1):
            raise ValueError(f"dispatch ids repeat: {repeated}")
        per_attempt = Counter(d.attempt for d in self.dispatches)
        declared = {a.attempt: a.coder_dispatches for a in self.attempts}
        for number in sorted(set(per_attempt) | set(declared)):
            if per_attempt.get(number, 0) != declared.get(number, 0):
                raise ValueError(
                    f"attempt {number} declares {declared.get(number, 0)} coder dispatches "
                    f"but {per_attempt.get(number, 0)} dispatch records belong to it"
                )
        return self

    def stage_increments(self) -> dict[Stage, int]:
        """What this close adds to each counting stage (the ``task`` stage is set, not added).

        ``recover`` counts recovery waves: every attempt after the first.
        """
        return {
            Stage.RECOVER: max(0, len(self.attempts) - 1),
            Stage.DISPATCH: len(self.dispatches),
            Stage.JUDGE: self.judge_calls,
            Stage.LAND: self.land_attempts,
        }


class RunRecord(BaseModel):
    """A run as the ledger holds it; the settle fields are set once it is closed."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str
    task_id: str
    dispatch_id: str | None = None
    status: RunStatus
    started_at: AwareDatetime
    finished_at: AwareDatetime | None = None
    settle_row: SettleRow | None = None
    attempt_spent: bool | None = None
    task_status: TaskStatus | None = None
    reason: str | None = None
    payload_path: str | None = None

    @property
    def open(self) -> bool:
        return self.finished_at is None


class Event(BaseModel):
    """One entry of the append-only event log.

    ``kind`` reads back as an :class:`EventKind`, or as the stored text when a newer version
    (or a hand edit) wrote a kind this one does not know: shown, never a reason to fail.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: int
    at: AwareDatetime
    task_id: str | None = None
    run_id: str | None = None
    kind: EventKind | str = Field(union_mode="left_to_right")
    data: dict[str, Any] = Field(default_factory=dict)
