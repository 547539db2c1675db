"""What one validator said about one candidate.

The shape is the design's "validator result". ``error=True`` means the validator could not reach
a verdict at all, so an errored result is never read as a pass whatever its ``severity`` says.
``advisory`` marks a validator whose contract says ``on_fail: warn``: it can warn, never block,
and never halt: one that could not run (its tool missing, timed out, its model unreachable) is
recorded as it is (``error=True``) with severity ``warn``, and read as a warning.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from assay.core.vocab import Severity


class ValidatorResult(BaseModel):
    """One validator's verdict (or failure to reach one) on one code state."""

    # Persisted inside payloads and read back, so unknown keys are ignored rather than refused.
    model_config = ConfigDict(extra="ignore", frozen=True)

    validator_id: str = Field(min_length=1)
    severity: Severity
    error: bool = False
    justification: str = ""
    findings: list[str] = Field(default_factory=list)
    advisory: bool = False

    @property
    def effective_severity(self) -> Severity:
        """The severity decisions act on: an advisory validator's block, or its failure to
        reach a verdict, only warns."""
        if self.advisory and (self.error or self.severity is Severity.BLOCK):
            return Severity.WARN
        return self.severity

    @property
    def blocks(self) -> bool:
        """True when this result, on its own, stops the wave (errors are handled apart)."""
        return not self.error and self.effective_severity is Severity.BLOCK

    @property
    def halts(self) -> bool:
        """True when this validator could not reach a verdict and its verdict was needed: the
        run halts (``validator_error``). An advisory validator's error is a warning."""
        return self.error and not self.advisory

    def as_advisory(self) -> ValidatorResult:
        """This result as a validator that may only warn (``on_fail: warn``) reports it:
        ``advisory``, and never the severity ``block``, whatever the adapter said."""
        severity = Severity.WARN if self.severity is Severity.BLOCK else self.severity
        if self.error:
            severity = Severity.WARN  # it reached no verdict; that it could not is the warning
        if self.advisory and severity is self.severity:
            return self
        return self.model_copy(update={"advisory": True, "severity": severity})
