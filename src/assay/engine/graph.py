"""run_graph(): one run of a task, written only against :class:`Effects`.

Deterministic: the same plan and the same effect results give the same decisions, whether the
effects run in-process or as Temporal activities. Order of a run: preflight and arm; then
attempts — dispatch every seat, read coder-fired halts, validate the chosen candidate, decide
(proceed, recover or halt); land; and the result the executor closes the run with.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from assay.adapters.validators.base import ValidationOutcome
from assay.core.ledger import finding_signatures
from assay.core.policy import PolicyDecision, decide
from assay.core.recovery import PriorFailure, recovery_spec
from assay.core.vocab import (
    AttemptNext,
    CanonicalHalt,
    HaltSeverity,
    HaltType,
    LandMode,
    PolicyAction,
    RunStatus,
)
from assay.engine.accounting import (
    blocking_findings,
    budget_detail,
    failure_detail,
    hit_budget,
    record_attempt,
    seat_event,
)
from assay.engine.effects import Effects, RunEvent, RunPlan, SeatOutcome
from assay.engine.empty_wave import (
    claims_no_change,
    empty_wave_signatures,
    no_candidate,
    verify_noop,
)
from assay.engine.result import RunResult, end_run

__all__ = ["run_graph"]

VERIFICATION_GAP_EVIDENCE = (
    "no validator verifies the change: the contract declares no command or judge validator, "
    "only the built-in scope and secret checks run, so `land: merge` leaves a branch instead "
    "unless the contract says `land_unverified: true`"
)


async def run_graph(plan: RunPlan, fx: Effects) -> RunResult:
    contract = plan.contract
    # The base is journaled so a recovery can tell whether this run already landed.
    started = {"run_id": plan.run_id, "seats": contract.seats, "base_commit": plan.base_commit}
    await fx.emit(RunEvent("run.started", {**started, "base_branch": plan.base_branch}))
    unresolved = await fx.preflight(plan)
    await fx.arm(plan)
    if not contract.verified:
        await fx.fire(plan, CanonicalHalt.VERIFICATION_GAP, VERIFICATION_GAP_EVIDENCE)
    if unresolved:
        evidence = "anchors do not resolve at the base commit: " + ", ".join(unresolved)
        await fx.fire(plan, CanonicalHalt.ANCHOR_RESOLUTION_FAILURE, evidence)
        run = RunResult(RunStatus.BLOCKED, HaltType.ESCALATE, evidence, halted=True)
        run.fired = await fx.fired_halts(plan)
        return run

    run = RunResult(RunStatus.BLOCKED, HaltType.BLOCKER, "")
    failures: list[PriorFailure] = []
    previous: list[str] | None = None
    waves = 1 + contract.budgets.max_recovery
    for attempt in range(1, waves + 1):
        if attempt > 1:
            run.recovery_waves += 1
        prompt = recovery_spec(contract.task, failures)
        await fx.emit(RunEvent("attempt.started", {"attempt": attempt}))
        for seat in range(1, contract.seats + 1):  # recorded before it runs: counts stay exact
            coder = contract.coder_for_seat(seat).kind.value
            await fx.emit(
                RunEvent("dispatch.started", {"attempt": attempt, "seat": seat, "coder": coder})
            )
        seats = list(
            await asyncio.gather(
                *(fx.dispatch(plan, attempt, seat, prompt) for seat in range(1, contract.seats + 1))
            )
        )
        run.dispatches.extend(seats)
        for seat in seats:
            await fx.emit(RunEvent("seat.finished", seat_event(seat)))
            if hit_budget(seat):
                await fx.fire(
                    plan,
                    CanonicalHalt.BUDGET_EXHAUSTED,
                    f"attempt {attempt} seat {seat.seat}: {budget_detail(seat)}",
                )
        run.fired = await fx.fired_halts(plan)
        blocking = [h for h in run.fired if h.severity is HaltSeverity.BLOCK]
        if blocking:
            names = ", ".join(f"{h.name} ({h.detail})" for h in blocking)
            run.attempts.append(record_attempt(attempt, seats, [], fault=True, failures=[names]))
            return end_run(
                run, RunStatus.BLOCKED, HaltType.ESCALATE, f"block halt fired: {names}", halted=True
            )

        viable = [s for s in seats if s.viable]
        if not viable and claims_no_change(seats):
            noop = await verify_noop(plan, fx, run, attempt, seats)
            if noop is not None:
                return noop
        if not viable:
            ended = no_candidate(run, attempt, seats, failures)
            if ended is not None:
                return ended
            empty = empty_wave_signatures(run, attempt)
            if empty is not None and empty == previous:
                return await _end_blocked(
                    plan,
                    fx,
                    run,
                    f"stuck: attempt {attempt} failed exactly as attempt {attempt - 1} did",
                )
            previous = empty
            if attempt == waves:
                return end_run(
                    run, RunStatus.BLOCKED, HaltType.BLOCKER, "no attempt produced a change"
                )
            continue

        if len(viable) > 1 and contract.judges > 0:
            judged = await _judge(plan, fx, run, attempt, seats, viable)
            if isinstance(judged, RunResult):
                return judged
            chosen, outcomes = judged, await fx.validate(plan, judged)
            run.validations += 1
        else:
            chosen, outcomes = await _validate_best(plan, fx, viable)
            run.validations += len(viable)
        run.winner = chosen
        for outcome in outcomes:
            if outcome.fire is not None:
                await fx.fire(plan, outcome.fire, outcome.evidence or outcome.result.justification)
        results = [o.result for o in outcomes]
        run.validator_results = results
        lost = _judge_validator_lost(run, attempt, seats, outcomes)
        if lost is not None:
            return lost
        decision = decide(results, contract.policy, contract.threshold)
        run.policy_decision = decision
        signatures = finding_signatures(blocking_findings(results))
        failed = [r for r in results if r.error or r.blocks]
        run.attempts.append(
            record_attempt(
                attempt,
                seats,
                results,
                fault=False,
                failures=[f"{r.validator_id}: {failure_detail(r)}" for r in failed],
                signatures=signatures,
            )
        )
        halted_by = [o.fire.value for o in outcomes if o.fire is not None]
        stuck = previous is not None and signatures == previous
        going, why = _next_step(decision, halted_by, stuck, attempt, waves)
        await fx.emit(
            RunEvent(
                "attempt.decided",
                {
                    "attempt": attempt,
                    "outcome": run.attempts[-1].outcome.value,
                    "action": decision.action.value,
                    "next": going.value,
                    "why": why,
                    "seat": chosen.seat,
                    "failures": [
                        f"{r.validator_id}: {'; '.join(r.findings) or r.justification}"[:300]
                        for r in failed
                    ],
                },
            )
        )
        if halted_by:
            run.fired = await fx.fired_halts(plan)
            return end_run(run, RunStatus.BLOCKED, HaltType.ESCALATE, why, halted=True)
        if decision.action is PolicyAction.PROCEED:
            run.land = await fx.land(plan, chosen, attempts=run.attempts)
            run.validations += run.land.validations
            return _landed(run)
        if decision.action is PolicyAction.HALT:
            return end_run(run, RunStatus.FAILED, HaltType.VALIDATOR_ERROR, decision.justification)
        failures.extend(
            PriorFailure(attempt=attempt, source=r.validator_id, detail=failure_detail(r))
            for r in failed
        )
        if stuck:
            return await _end_blocked(plan, fx, run, why)
        previous = signatures
    return await _end_blocked(
        plan,
        fx,
        run,
        f"validators still block after {waves} attempt(s): {run.policy_decision.justification}"
        if run.policy_decision
        else f"no passing candidate after {waves} attempt(s)",
    )


def _next_step(
    decision: PolicyDecision, halted_by: list[str], stuck: bool, attempt: int, waves: int
) -> tuple[AttemptNext, str]:
    """What the run does after this attempt and why: the attempt that follows a recovery, the
    reason a run ends (the progress line and the ledger's ``attempt.decided`` say this, not
    the bare policy action)."""
    if halted_by:
        return AttemptNext.END, f"block halt fired: {', '.join(halted_by)}"
    if decision.action is PolicyAction.PROCEED:
        return AttemptNext.LAND, ""
    if decision.action is PolicyAction.HALT:
        return AttemptNext.END, decision.justification
    if stuck:
        return (
            AttemptNext.END,
            f"stuck: attempt {attempt} failed exactly as attempt {attempt - 1} did",
        )
    if attempt >= waves:
        return AttemptNext.END, f"no recovery left (max_recovery {waves - 1})"
    return AttemptNext.RECOVER, f"attempt {attempt + 1} of {waves} follows"


async def _judge(
    plan: RunPlan,
    fx: Effects,
    run: RunResult,
    attempt: int,
    seats: list[SeatOutcome],
    viable: list[SeatOutcome],
) -> SeatOutcome | RunResult:
    """Blind judges rank the viable candidates; the winner, or the run stalled without quorum."""
    panel = await fx.judge(plan, attempt, viable)
    run.tally = panel.tally
    run.labels.update(panel.labels)
    run.judge_calls += panel.calls
    tally = panel.tally
    await fx.emit(
        RunEvent(
            "judges.ranked",
            {
                "attempt": attempt,
                "winner": tally.winner,
                "present": tally.present,
                "quorum": tally.quorum,
                "lost_to_quota": panel.lost_to_quota,
                "lost_to_fault": panel.lost_to_fault,
            },
        )
    )
    if tally.winner is not None and tally.met_quorum:
        return next(s for s in viable if panel.labels[s.seat] == tally.winner)
    # A machine fact (quota, a provider fault) is the cause only when the judges it took would
    # have made the quorum; then the run is refunded: stalled on quota (waits for its reset),
    # failed on a provider fault (backoff), as settle's refund rows read them.
    lost = panel.lost_to_quota + panel.lost_to_fault
    machine = lost > 0 and tally.present + lost >= tally.quorum
    quota = machine and panel.lost_to_quota > 0
    run.quota_hit = quota
    run.quota_reset_at = panel.quota_reset_at if quota else None
    run.machine_fault = machine and not quota
    reason = f"no quorum: {tally.present} usable ranking(s) of {tally.quorum} needed" + (
        f", {panel.lost_to_quota} judge(s) lost to quota" if panel.lost_to_quota else ""
    )
    if panel.lost_to_fault:
        reason += f", {panel.lost_to_fault} judge(s) lost to a provider fault"
    if panel.problems:
        reason += (": " if lost else "; ") + "; ".join(panel.problems)
    run.attempts.append(record_attempt(attempt, seats, [], fault=True, failures=[reason]))
    halt_type = HaltType.ENVIRONMENT_ERROR if machine else HaltType.VALIDATOR_ERROR
    status = RunStatus.FAILED if run.machine_fault else RunStatus.STALLED
    return end_run(run, status, halt_type, reason)


def _judge_validator_lost(
    run: RunResult, attempt: int, seats: list[SeatOutcome], outcomes: list[ValidationOutcome]
) -> RunResult | None:
    """A judge validator lost to its provider (quota, or a fault that outlived the retries) is
    a machine fact, not a verdict on the task: the run ends refunded, the fault named."""
    results = [o.result for o in outcomes]
    quota = [o.quota for o in outcomes if o.quota is not None]
    faults = [o.fault for o in outcomes if o.fault is not None]
    if quota:
        run.quota_hit = True
        run.quota_reset_at = _latest([q.reset_at for q in quota])
        detail = "; ".join(q.detail for q in quota)
        status, reason = RunStatus.STALLED, f"a judge hit its quota: {detail}"
    elif faults:
        run.machine_fault = True
        detail = "; ".join(faults)
        status, reason = RunStatus.FAILED, f"a judge was lost to a provider fault: {detail}"
    else:
        return None
    run.attempts.append(record_attempt(attempt, seats, results, fault=True, failures=[detail]))
    return end_run(run, status, HaltType.ENVIRONMENT_ERROR, reason)


def _landed(run: RunResult) -> RunResult:
    """End a run whose candidate passed on what its landing did. A landing that failed on a
    machine fault is refunded (the task lands again later); a refused one goes to a human."""
    land = run.land
    assert land is not None
    if land.machine_fault:
        run.machine_fault = True
        reason = f"the landing failed on a machine fault; the task lands again later: {land.detail}"
        return end_run(run, RunStatus.FAILED, HaltType.ENVIRONMENT_ERROR, reason)
    if land.refused:
        run.land_refused = True
        # Blocked by the landing alone: say first that the change itself passed.
        reason = f"the validators passed; the pull request was refused: {land.detail}"
        return end_run(run, RunStatus.BLOCKED, HaltType.ESCALATE, reason)
    # Blocked here: the base branch moved and the change does not hold on its tip.
    moved = land.status is RunStatus.BLOCKED
    return end_run(run, land.status, HaltType.BLOCKER if moved else HaltType.NONE, land.detail)


def _latest(times: list[datetime | None]) -> datetime | None:
    known = [t for t in times if t is not None]
    return max(known) if known else None


async def _validate_best(
    plan: RunPlan, fx: Effects, viable: list[SeatOutcome]
) -> tuple[SeatOutcome, list[ValidationOutcome]]:
    """Validate every viable candidate; keep the first (by seat) that proceeds, else the first."""
    judged = [(seat, await fx.validate(plan, seat)) for seat in viable]
    contract = plan.contract
    for seat, outcomes in judged:
        decision = decide([o.result for o in outcomes], contract.policy, contract.threshold)
        if decision.action is PolicyAction.PROCEED and all(o.fire is None for o in outcomes):
            return seat, outcomes
    return judged[0]


async def _end_blocked(plan: RunPlan, fx: Effects, run: RunResult, reason: str) -> RunResult:
    """The validators still block (recovery spent, or stuck). Under ``land: pr`` the last chosen
    candidate is left as a draft pull request listing the failures, so a human reviews it:
    the run stays blocked and settle's ``blocked_with_pr`` row holds the task."""
    end_run(run, RunStatus.BLOCKED, HaltType.BLOCKER, reason)
    last = run.attempts[-1] if run.attempts else None
    # Only a candidate of the last attempt: its failures are the ones the PR lists.
    if (
        plan.contract.land is LandMode.PR
        and run.winner
        and last
        and run.winner.attempt == last.attempt
    ):
        run.land = await fx.land(plan, run.winner, blocked=True, failures=last.failures)
        if run.land.left_pr:
            run.reason = f"{reason}; left for review as {run.land.pr_url}"
    return run
