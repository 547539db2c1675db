"""Attempts: one judged pass over a code state, and the payload's summary of them all.

A clean pass and a hard-won pass must look different in the payload, so the summary carries
exact counts over the whole chain and a bounded history (the newest attempts) with the number
of older ones left out. The summary is derived from the records, never stored a second time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from assay.core.results import ValidatorResult
from assay.core.vocab import AttemptOutcome, Severity

MAX_ATTEMPT_HISTORY = 20


class AttemptRecord(BaseModel):
    """One attempt: its 1-based number, how it ended, what it cost and what it found."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    attempt: int = Field(ge=1)
    outcome: AttemptOutcome
    coder_dispatches: int = Field(ge=0)
    failures: list[str] = Field(default_factory=list)
    finding_signatures: list[str] = Field(default_factory=list)
    # Its run's process or worker died in it, before the run closed (its outcome is ``error``,
    # whatever its validators had said: its change never landed).
    interrupted: bool = False


class AttemptEntry(BaseModel):
    """One line of the bounded history: which attempt, and its canonical outcome;
    ``interrupted`` (only when true) says its run died in it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    attempt: int = Field(ge=1)
    outcome: AttemptOutcome
    interrupted: bool | None = Field(default=None, exclude_if=lambda value: not value)


class AttemptsSummary(BaseModel):
    """The payload's ``attempts``: exact counts, the newest history, and ``omitted`` if cut.

    ``omitted`` is absent from every serialised form unless the history was cut, so a payload
    reader can tell "nothing left out" from "left out zero" without a null in between.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    total: int = Field(ge=0)
    coder_dispatches: int = Field(ge=0)
    history: list[AttemptEntry] = Field(default_factory=list)
    omitted: int | None = Field(default=None, ge=1, exclude_if=lambda value: value is None)

    def to_json(self) -> dict[str, Any]:
        """The JSON form: ``{total, coder_dispatches, history}`` plus ``omitted`` when cut."""
        return self.model_dump(mode="json", exclude_none=True)


def attempt_outcome(
    results: Iterable[ValidatorResult], operational_fault: bool = False
) -> AttemptOutcome:
    """The canonical outcome of one attempt from its final validator results.

    ``error`` if any result errored or the attempt ended on an operational fault; else
    ``blocked`` if any result blocks; else ``warned`` if any warns; else ``passed``. An advisory
    validator's block, or its error, counts as a warning, as it does in the policy decision.
    """
    results = list(results)
    if operational_fault or any(result.halts for result in results):
        return AttemptOutcome.ERROR
    severities = {result.effective_severity for result in results}
    if Severity.BLOCK in severities:
        return AttemptOutcome.BLOCKED
    if Severity.WARN in severities:
        return AttemptOutcome.WARNED
    return AttemptOutcome.PASSED


def summarize_attempts(
    records: Sequence[AttemptRecord], max_history: int = MAX_ATTEMPT_HISTORY
) -> AttemptsSummary:
    """Summarise a chain of attempts: exact counts, the newest ``max_history`` in order.

    Records are ordered by attempt number (stably, so records already in order keep it); the
    newest are the highest-numbered. ``omitted`` is set only when the history was cut.
    """
    if max_history < 0:
        raise ValueError(f"max_history must be at least 0, got {max_history}")
    ordered = sorted(records, key=lambda record: record.attempt)
    kept = ordered[max(0, len(ordered) - max_history) :]
    omitted = len(ordered) - len(kept)
    return AttemptsSummary(
        total=len(ordered),
        coder_dispatches=sum(record.coder_dispatches for record in ordered),
        history=[
            AttemptEntry(attempt=r.attempt, outcome=r.outcome, interrupted=r.interrupted or None)
            for r in kept
        ],
        omitted=omitted or None,
    )
