"""The convergence ledger: every attempt counter of a task, in one place (seed 003).

Each stage of the loop a task goes through (``Stage``) has one ``StageRecord``: how many
attempts it has spent, and the verdict and finding signatures it last reached. Attempts and
verdicts are written by separate methods on purpose: recording what a stage concluded never
moves its budget, so a counter can only change where the code says "increment".

A *lap* is one trip round a stage's loop (in assay: one judged attempt, recorded on the
``recover`` stage). Each lap keeps its finding-signature set so the ledger can tell a task that
is converging from one that keeps producing the same failures.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from assay.core.laps import MAX_LAP_HISTORY, finding_signatures, normalise_finding, oscillating
from assay.core.vocab import AttemptOutcome, Stage, StageVerdict, TaskStatus

__all__ = [
    "MAX_LAP_HISTORY",
    "ConvergenceLedger",
    "ForeignStageRecord",
    "StageRecord",
    "finding_signatures",
    "normalise_finding",
    "outcome_verdict",
    "task_verdict",
]


def _stage(stage: Stage | str) -> str:
    """The key a stage is stored under; unknown stages raise ``ValueError`` (closed set)."""
    return Stage(stage).value


class StageRecord(BaseModel):
    """One stage's counter and the last verdict it reached."""

    model_config = ConfigDict(extra="ignore", validate_assignment=True)

    attempts: int = Field(default=0, ge=0)
    last_verdict: StageVerdict = StageVerdict.UNVISITED
    last_finding_signatures: list[str] = Field(default_factory=list)

    @field_validator("last_finding_signatures")
    @classmethod
    def _normalised(cls, value: list[str]) -> list[str]:
        return finding_signatures(value)


class ForeignStageRecord(BaseModel):
    """A stage row this version does not know (a newer assay wrote it): shown as read, never
    counted, so one unknown name cannot make a task's ledger unreadable."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    attempts: int = 0
    last_verdict: str = ""
    last_finding_signatures: list[str] = Field(default_factory=list)


class ConvergenceLedger(BaseModel):
    """A task's stage records and lap history.

    ``converged`` is derived: the ``task`` stage's last verdict is ``advance`` (the latest run
    landed). ``oscillating`` is derived: ``is_oscillating()`` after the newest lap. Both are
    recomputed on construction and by every method that can change them, so a ledger read back
    from storage cannot disagree with its own records.
    """

    model_config = ConfigDict(extra="ignore")

    task_id: str = Field(min_length=1)
    stage_state: dict[str, StageRecord] = Field(default_factory=dict)
    laps: int = Field(default=0, ge=0)
    lap_signatures: list[list[str]] = Field(default_factory=list)
    converged: bool = False
    oscillating: bool = False
    foreign_stages: dict[str, ForeignStageRecord] = Field(default_factory=dict)

    @field_validator("stage_state")
    @classmethod
    def _known_stages(cls, value: dict[str, StageRecord]) -> dict[str, StageRecord]:
        return {_stage(key): record for key, record in value.items()}

    @field_validator("lap_signatures")
    @classmethod
    def _bounded(cls, value: list[list[str]]) -> list[list[str]]:
        return [finding_signatures(lap) for lap in value[-MAX_LAP_HISTORY:]]

    @model_validator(mode="after")
    def _derive(self) -> ConvergenceLedger:
        if self.laps < len(self.lap_signatures):
            raise ValueError(f"laps ({self.laps}) is fewer than the laps kept")
        self._recompute()
        return self

    def record(self, stage: Stage | str) -> StageRecord:
        """The stage's record, created unvisited on first use."""
        key = _stage(stage)
        if key not in self.stage_state:
            self.stage_state[key] = StageRecord()
        return self.stage_state[key]

    def attempts(self, stage: Stage | str) -> int:
        """Attempts spent on ``stage`` (0 for a stage never touched)."""
        found = self.stage_state.get(_stage(stage))
        return found.attempts if found is not None else 0

    def increment_attempts(self, stage: Stage | str, by: int = 1) -> int:
        """Spend ``by`` attempts on ``stage`` and return its new count.

        ``by`` below zero raises ``ValueError``: counters only go up here; a reset is
        ``reset_attempts``, an explicit act (a human releasing a held task).
        """
        if by < 0:
            raise ValueError(f"cannot increment by {by}: attempts only go up")
        record = self.record(stage)
        record.attempts += by
        return record.attempts

    def reset_attempts(self, stage: Stage | str) -> None:
        """Give ``stage`` a fresh budget; its verdict history is kept."""
        self.record(stage).attempts = 0

    def record_verdict(
        self, stage: Stage | str, verdict: StageVerdict, signatures: Iterable[str] = ()
    ) -> None:
        """Record what ``stage`` concluded and the findings behind it. Never touches attempts."""
        record = self.record(stage)
        record.last_verdict = verdict
        record.last_finding_signatures = finding_signatures(signatures)
        self._recompute()

    def mark_lap(self, stage: Stage | str = Stage.RECOVER) -> None:
        """Close one lap: keep ``stage``'s current signature set, count it, re-check oscillation.

        The current signature set is ``stage``'s ``last_finding_signatures`` (the ``recover``
        stage by default, where each judged attempt records its verdict).
        """
        self.lap_signatures = [
            *self.lap_signatures[-(MAX_LAP_HISTORY - 1) :],
            list(self.record(stage).last_finding_signatures),
        ]
        self.laps += 1
        self._recompute()

    def is_oscillating(self, window: int = 2) -> bool:
        """Whether the newest lap repeats a failure seen within the ``window`` laps before it
        (see :func:`assay.core.laps.oscillating`)."""
        return oscillating(self.lap_signatures, window)

    def _recompute(self) -> None:
        task = self.stage_state.get(Stage.TASK.value)
        self.converged = task is not None and task.last_verdict is StageVerdict.ADVANCE
        self.oscillating = self.is_oscillating()


def outcome_verdict(outcome: AttemptOutcome) -> StageVerdict:
    """An attempt's outcome as the recover stage's verdict.

    A pass (clean or with warnings) advances; a block loops back into recovery; an error means
    no verdict could be reached, which is for a human.
    """
    if outcome in (AttemptOutcome.PASSED, AttemptOutcome.WARNED):
        return StageVerdict.ADVANCE
    if outcome is AttemptOutcome.BLOCKED:
        return StageVerdict.LOOP_BACK
    return StageVerdict.ESCALATE


def task_verdict(status: TaskStatus) -> StageVerdict:
    """A settled task's status as the task stage's verdict.

    Done advances; Held escalates to a human; anything runnable again loops back.
    """
    if status is TaskStatus.DONE:
        return StageVerdict.ADVANCE
    if status is TaskStatus.HELD:
        return StageVerdict.ESCALATE
    return StageVerdict.LOOP_BACK
