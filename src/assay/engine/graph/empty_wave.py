"""A wave with no viable candidate: a verified no-op, a machine fact, or a recovery.

Every seat left the tree unchanged or was lost. When each one says, with evidence, that nothing
needs to change, the validators check that claim; when every seat was lost to a machine fact
(quota, a provider fault, the environment) the run ends refunded; otherwise the seats that ran
feed the next recovery wave.
"""

from __future__ import annotations

from pydantic import JsonValue

from assay.core.ledger import finding_signatures
from assay.core.policy import decide
from assay.core.recovery import PriorFailure
from assay.core.results import ValidatorResult
from assay.core.vocab import (
    AttemptNext,
    AttemptOutcome,
    HaltType,
    PolicyAction,
    RunStatus,
    Severity,
)
from assay.engine.effects import CandidateCall, Effects, RunPlan
from assay.engine.graph.endings import end_run
from assay.engine.graph.records import (
    blocking_findings,
    failure_detail,
    failure_summary,
    no_change_claim,
    record_attempt,
    seat_error,
    seat_errors,
)
from assay.engine.run_result import RunResult
from assay.engine.values import Candidate

NO_CHANGE_CHECK = "assay.change"


def claims_no_change(seats: list[Candidate]) -> bool:
    """Every seat that ran left the tree unchanged and says why, with evidence after the mark."""
    ran = [s for s in seats if not s.lost_to_machine]
    return bool(ran) and all(no_change_claim(s) is not None for s in ran)


async def verify_noop(
    plan: RunPlan, fx: Effects, run: RunResult, attempt: int, seats: list[Candidate]
) -> RunResult | list[ValidatorResult]:
    """A unanimous "nothing to change" is checked, not believed: the validators must pass on the
    unchanged tree. Then the run is verified_noop and settle holds the task for a human;
    otherwise the validators that refuted the claim (what the attempt says failed)."""
    claimant = next(s for s in seats if not s.lost_to_machine)
    outcomes = await fx.validate(CandidateCall(plan, claimant))
    results = [o.result for o in outcomes]
    decision = decide(results, plan.contract.policy, plan.contract.threshold)
    run.validations += 1
    run.winner = claimant
    run.validator_results = results
    run.policy_decision = decision
    if decision.action is not PolicyAction.PROCEED or any(o.fire for o in outcomes):
        return [r for r in results if r.blocks or r.halts]
    run.attempts.append(record_attempt(attempt, seats, results, fault=False, failures=[]))
    evidence = (claimant.report.summary or "").strip() if claimant.report else ""
    return end_run(
        run,
        RunStatus.VERIFIED_NOOP,
        HaltType.NONE,
        f"every candidate says no change is needed and the validators pass: {evidence}"[:2000],
    )


def no_candidate(
    run: RunResult,
    attempt: int,
    seats: list[Candidate],
    failures: list[PriorFailure],
    refuted: list[ValidatorResult] | None = None,
) -> RunResult | None:
    """A wave with no viable candidate: end the run on a machine fact, or note it and recover.

    When every seat was lost to a machine fact (quota, a provider fault, the environment) the
    run ends refunded. Otherwise the seats that ran and changed nothing feed the recovery spec;
    a seat lost to a machine fact never does (a provider's 529 is not the agent's to fix).
    ``refuted``: the validators that failed the unchanged tree a "no change needed" claim was
    checked on; they are the attempt's failures too, and in the spec.
    """
    refuted = refuted or []
    lost = [s for s in seats if s.lost_to_quota]
    faulted = [s for s in seats if s.lost_to_provider_fault]
    broken = [s for s in seats if s.environment_error and not s.lost_to_provider_fault]
    if lost or faulted or broken:
        run.attempts.append(
            record_attempt(attempt, seats, [], fault=True, failures=seat_errors(seats))
        )
    if all(s.lost_to_machine for s in seats):
        quotas = [s.dispatch.quota for s in lost if s.dispatch.quota]
        resets = [q.reset_at for q in quotas if q.reset_at]
        return end_run(
            run,
            RunStatus.FAILED,
            HaltType.ENVIRONMENT_ERROR,
            lost_reason(seats),
            no_viable_candidates=True,
            machine_fault=bool(faulted or broken),
            quota_hit=bool(lost),
            quota_reset_at=max(resets) if resets else None,
        )
    if not (lost or faulted or broken):
        crashed = any(s.dispatch.error or s.dispatch.timed_out for s in seats)
        errors = seat_errors(seats) or ["the coder left the tree unchanged"]
        result = ValidatorResult(
            validator_id=NO_CHANGE_CHECK,
            severity=Severity.BLOCK,
            justification="no seat produced a change",
            findings=errors,
        )
        run.attempts.append(
            record_attempt(
                attempt,
                seats,
                [result, *refuted],
                fault=crashed,
                failures=errors + [f"{r.validator_id}: {failure_detail(r)}" for r in refuted],
                signatures=finding_signatures(errors + blocking_findings(refuted)),
            )
        )
    failures.extend(
        PriorFailure(attempt=attempt, source=f"seat {s.seat}", detail=seat_error(s))
        for s in seats
        if not (s.lost_to_quota or s.lost_to_provider_fault)
    )
    failures.extend(
        PriorFailure(attempt=attempt, source=r.validator_id, detail=failure_detail(r))
        for r in refuted
    )
    return None


def refuted_decision(
    attempt: int, seat: int, refuted: list[ValidatorResult], going: AttemptNext, why: str
) -> dict[str, JsonValue]:
    """The ``attempt.decided`` event of a wave whose "no change needed" claim the validators
    refuted: what they said, as any attempt's decision says its failed validators."""
    return {
        "attempt": attempt,
        "outcome": AttemptOutcome.BLOCKED.value,
        "action": PolicyAction.RECOVER.value,
        "next": going.value,
        "why": why,
        "seat": seat,
        "failures": [failure_summary(r) for r in refuted],
    }


def empty_wave_signatures(run: RunResult, attempt: int) -> list[str] | None:
    """The finding signatures :func:`no_candidate` recorded for ``attempt`` when every seat ran
    and changed nothing, or None (seats lost to a machine fact say nothing about being stuck)."""
    last = run.attempts[-1] if run.attempts else None
    if last is None or last.attempt != attempt or not last.finding_signatures:
        return None
    return list(last.finding_signatures)


def lost_reason(seats: list[Candidate]) -> str:
    """Why a wave where every seat was lost to a machine fact ended, naming the faults."""
    quota = [s.dispatch.quota.detail for s in seats if s.dispatch.quota]
    faults = [s.dispatch.fault for s in seats if s.lost_to_provider_fault and s.dispatch.fault]
    broken = [
        s.environment_error or ""
        for s in seats
        if s.environment_error and not s.lost_to_quota and not s.lost_to_provider_fault
    ]
    if quota and not faults:
        return "every seat lost to quota: " + _distinct(quota)
    if faults and not (quota or broken):
        return "every seat lost to a provider fault: " + _distinct(faults)
    if broken and not (quota or faults):
        return _distinct(broken)
    return "every seat lost to a machine fault: " + "; ".join(
        f"seat {s.seat}: {seat_error(s)}" for s in seats
    )


def _distinct(details: list[str]) -> str:
    """Each detail once, with how many seats said it when more than one did."""
    counts: dict[str, int] = {}
    for detail in details:
        counts[detail] = counts.get(detail, 0) + 1
    return "; ".join(d if n == 1 else f"{d} ({n} seats)" for d, n in counts.items())
