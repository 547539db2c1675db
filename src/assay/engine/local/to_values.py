"""A seat's adapter results turned into the boundary's values (:mod:`assay.engine.values`):
its dispatch as a candidate, a validator's outcome as a validation. Also what a dispatch
produces besides the coder's own result: a seat the machine failed, the report that counts,
and the coder's captured output the secret scan reads."""

from __future__ import annotations

from dataclasses import replace

from assay.adapters.coders.base import DispatchResult
from assay.adapters.process import EnvironmentFault
from assay.adapters.validators.base import ValidationOutcome
from assay.core.changes import ChangeSet
from assay.core.report import CoderReport, DiffComparison
from assay.engine.values import Candidate, DispatchSummary, Validation

# The tail of a coder's log the secret scan reads.
CAPTURED_OUTPUT_CHARS = 200_000


def environment_failed(fault: EnvironmentFault) -> DispatchResult:
    """A seat the machine failed (its files could not be written): refunded, named."""
    return DispatchResult(
        exit_code=None, environment_error=f"the coder's environment failed: {fault}"
    )


def with_final_answer(
    written: CoderReport | None, derived: CoderReport | None
) -> CoderReport | None:
    """The coder's report file, else what the adapter read from the program's output; a file
    without a summary takes the program's final answer as its summary, so a ``NO CHANGE
    NEEDED:`` answer counts whether or not the agent also wrote a report."""
    if written is None:
        return derived
    if written.summary is None and derived is not None and derived.summary is not None:
        return written.model_copy(update={"summary": derived.summary})
    return written


def captured_output(result: DispatchResult) -> str:
    """The tail of what the coder printed. Not its log: the log starts with the command line
    assay ran (the operator's contract, an inline script), which is no output of the coder."""
    return result.output[-CAPTURED_OUTPUT_CHARS:]


def summary_of(result: DispatchResult) -> DispatchSummary:
    """The part of an adapter's dispatch result that crosses the effect boundary (its log
    and its report stay on the worker; the report crosses in the candidate)."""
    return DispatchSummary(
        exit_code=result.exit_code,
        stop_reason=result.stop_reason,
        tokens_used=result.tokens_used,
        cost_usd=result.cost_usd,
        turns_used=result.turns_used,
        wall_time_ms=result.wall_time_ms,
        timed_out=result.timed_out,
        quota=result.quota,
        fault=result.fault.detail if result.fault else None,
        environment_error=result.environment_error,
        setting_error=result.setting_error,
        error=result.error,
    )


def candidate_of(
    *,
    seat: int,
    attempt: int,
    coder: str,
    result: DispatchResult,
    change: ChangeSet,
    commit: str | None = None,
    report: CoderReport | None = None,
    comparison: DiffComparison | None = None,
    budget: str | None = None,
) -> Candidate:
    """A seat's dispatch as it crosses the boundary: its change as statistics, never the diff."""
    return Candidate(
        seat=seat,
        attempt=attempt,
        coder=coder,
        dispatch=replace(summary_of(result), budget=budget),
        commit=commit,
        files=change.paths,
        type_changes=change.type_changes(),
        insertions=sum(f.added_lines for f in change.files),
        deletions=sum(f.removed_lines for f in change.files),
        report=report,
        comparison=comparison or DiffComparison(),
    )


def validation_of(outcome: ValidationOutcome) -> Validation:
    """A validator's outcome without what the secret scan found (that stays for redaction)."""
    return Validation(
        result=outcome.result,
        fire=outcome.fire,
        evidence=outcome.evidence,
        quota=outcome.quota,
        fault=outcome.fault,
        setting_error=outcome.setting_error,
    )
