"""Validator results -> a policy decision: proceed, recover, or halt.

The rules, in order:

1. Any result with ``error=True`` from a blocking validator halts (``validator_error``): a
   validator that could not reach a verdict is never read as a pass, and retrying the coder
   cannot fix the validator.
2. Any block from a blocking (non-advisory) validator recovers: the next attempt gets the
   failures.
3. Otherwise only ``pass`` counts toward consensus, over the blocking validators alone:
   ``unanimous`` all of them, ``majority`` more than half, ``quorum`` at least ``threshold`` of
   them, ``any`` at least one. Met proceeds; not met recovers.

Advisory validators (``on_fail: warn``) appear in the counts but never in the consensus, and an
advisory block, or an advisory validator that could not reach a verdict, is counted as a
warning: it can neither block nor halt. With no blocking validators there is
nothing to disagree, so the decision proceeds with consensus achieved (whatever the mode).
The counts partition the results: ``pass + warn + block + error == total``.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import assert_never

from pydantic import BaseModel, ConfigDict, Field

from assay.core.results import ValidatorResult
from assay.core.vocab import PolicyAction, PolicyMode, Severity

DEFAULT_QUORUM_THRESHOLD = 0.67


class PolicyDecision(BaseModel):
    """What to do with a candidate, the tallies behind it, and a sentence saying why."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    action: PolicyAction
    consensus_achieved: bool
    pass_count: int = Field(ge=0)
    warn_count: int = Field(ge=0)
    block_count: int = Field(ge=0)
    error_count: int = Field(ge=0)
    total_count: int = Field(ge=0)
    justification: str


def decide(
    results: Iterable[ValidatorResult],
    mode: PolicyMode,
    threshold: float = DEFAULT_QUORUM_THRESHOLD,
) -> PolicyDecision:
    """Turn one candidate's final validator results into a decision (see the module rules)."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    mode = PolicyMode(mode)  # a contract's plain string works as well as the enum
    results = list(results)
    errored = [r for r in results if r.halts]
    judged = [r for r in results if not r.halts]
    counts = {severity: 0 for severity in Severity}
    for result in judged:
        counts[result.effective_severity] += 1

    def decision(action: PolicyAction, consensus: bool, why: str) -> PolicyDecision:
        return PolicyDecision(
            action=action,
            consensus_achieved=consensus,
            pass_count=counts[Severity.PASS],
            warn_count=counts[Severity.WARN],
            block_count=counts[Severity.BLOCK],
            error_count=len(errored),
            total_count=len(results),
            justification=why,
        )

    if errored:
        names = _names(errored)
        return decision(
            PolicyAction.HALT,
            False,
            f"{len(errored)} validator(s) could not reach a verdict ({names})",
        )
    blockers = [r for r in judged if r.blocks]
    if blockers:
        return decision(PolicyAction.RECOVER, False, f"blocked by {_names(blockers)}")
    counted = [r for r in judged if not r.advisory]
    advisory_note = _advisory_note([r for r in judged if r.advisory])
    if not counted:
        why = f"no blocking validators were declared, nothing can block{advisory_note}"
        return decision(PolicyAction.PROCEED, True, why)
    passes = sum(1 for r in counted if r.severity is Severity.PASS)
    met = _consensus(mode, passes, len(counted), threshold)
    rule = f"{mode.value} (threshold {threshold})" if mode is PolicyMode.QUORUM else mode.value
    tally = f"{passes} of {len(counted)} blocking validators passed"
    if met:
        return decision(PolicyAction.PROCEED, True, f"{rule} met: {tally}{advisory_note}")
    return decision(PolicyAction.RECOVER, False, f"{rule} not met: {tally}{advisory_note}")


def _consensus(mode: PolicyMode, passes: int, counted: int, threshold: float) -> bool:
    """Whether ``passes`` of ``counted`` meets ``mode``, in exact arithmetic.

    The threshold is read as the decimal it was written as (``0.67`` is 67/100, not the binary
    float just above it), so 67 passes of 100 meet a 0.67 quorum.
    """
    if mode is PolicyMode.UNANIMOUS:
        return passes == counted
    if mode is PolicyMode.MAJORITY:
        return 2 * passes > counted
    if mode is PolicyMode.QUORUM:
        return Fraction(passes, counted) >= Fraction(str(threshold))
    if mode is PolicyMode.ANY:
        return passes >= 1
    assert_never(mode)


def _names(results: list[ValidatorResult]) -> str:
    return ", ".join(r.validator_id for r in results)


def _advisory_note(advisory: list[ValidatorResult]) -> str:
    if not advisory:
        return ""
    unrun = [r for r in advisory if r.error]
    could_not = f"; could not run, warned only: {_names(unrun)}" if unrun else ""
    return f" ({len(advisory)} advisory result(s) not counted{could_not})"
