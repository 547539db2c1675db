"""What one seat's dispatch and validation produce besides the coder's own result: a seat the
machine failed, the report that counts, a seat whose ``.git`` was tampered with, and the
coder's captured output the secret scan reads."""

from __future__ import annotations

from assay.adapters.coders.base import DispatchResult
from assay.adapters.process import EnvironmentFault
from assay.adapters.validators.base import ValidationOutcome
from assay.core.report import CoderReport
from assay.core.results import ValidatorResult
from assay.core.vocab import CanonicalHalt, Severity

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


def tampered_outcome(why: str) -> ValidationOutcome:
    """A seat whose .git a validator's process replaced: no verdict, never a pass."""
    return ValidationOutcome(
        result=ValidatorResult(
            validator_id="seat", severity=Severity.BLOCK, error=True, justification=why
        ),
        fire=CanonicalHalt.SCOPE_BREACH,
        evidence=why,
    )


def captured_output(result: DispatchResult) -> str:
    if result.log_path is None or not result.log_path.exists():
        return ""
    return result.log_path.read_text(errors="replace")[-CAPTURED_OUTPUT_CHARS:]
