"""run_graph(): one run of a task, written only against :class:`Effects`.

Deterministic: the same plan and the same effect results give the same decisions, whether the
effects run in-process or as Temporal activities. Order of a run: preflight and arm; then
attempts — dispatch every seat, read coder-fired halts, validate the chosen candidate, decide
(proceed, recover or halt); land; and the result the executor closes the run with.
"""

from __future__ import annotations

import asyncio
import traceback

from pydantic import JsonValue

from assay.core.ledger import finding_signatures
from assay.core.policy import decide
from assay.core.recovery import PriorFailure, recovery_spec
from assay.core.results import ValidatorResult
from assay.core.vocab import (
    AttemptNext,
    BudgetAction,
    CanonicalHalt,
    EventKind,
    HaltSeverity,
    HaltType,
    LandMode,
    PolicyAction,
    RunStatus,
)
from assay.engine.effects import (
    CandidateCall,
    EffectFault,
    Effects,
    FaultKind,
    FireCall,
    JudgeCall,
    LandCall,
    OpenRequest,
    RecordCall,
    RunRecorded,
    RunStopped,
    SeatCall,
)
from assay.engine.graph.empty_wave import (
    claims_no_change,
    empty_wave_signatures,
    no_candidate,
    refuted_decision,
    verify_noop,
)
from assay.engine.graph.endings import cannot_run, judge_validator_lost, landed, next_step
from assay.engine.graph.records import (
    blocking_findings,
    budget_detail,
    failure_detail,
    failure_summary,
    hit_budget,
    record_attempt,
    seat_event,
    spending_exhausted,
)
from assay.engine.run_result import RunResult, end_run
from assay.engine.values import Candidate, RunEvent, RunPlan, Validation

__all__ = ["broken_result", "run_attempts", "run_graph"]

VERIFICATION_GAP_EVIDENCE = (
    "no validator verifies the change: the contract declares no command or judge validator, "
    "only the built-in scope and secret checks run, so `land: merge` leaves a branch instead "
    "unless the contract says `land_unverified: true`"
)


async def run_graph(request: OpenRequest, fx: Effects) -> RunRecorded:
    """One run: open it (on the worker that will hold its seats), its attempts, its record.

    A fault of an effect, or a bug, ends the run as a failed result that is still recorded;
    a stop from outside (:class:`RunStopped`) passes through: the executor closes the run.
    A failure of ``open`` itself passes through too: no run was made, so none is recorded."""
    handle = await fx.open(request)
    try:
        result = await run_attempts(handle.plan, fx)
    except RunStopped:
        raise
    except EffectFault as fault:
        result = broken_result(fault.kind, fault.reason, fault.trace)
    except Exception as exc:  # any bug becomes an honest internal_error payload
        result = broken_result(
            FaultKind.INTERNAL, f"internal error: {exc!r}", traceback.format_exc()
        )
    return await fx.record(RecordCall(handle, result))


def broken_result(kind: FaultKind, reason: str, trace: str = "") -> RunResult:
    """The result of a run the graph could not finish: failed, its counts taken from the
    run's journal when it is recorded; an environment fault is refunded like a seat lost to
    its environment."""
    if kind is FaultKind.ENVIRONMENT:
        result = RunResult(RunStatus.FAILED, HaltType.ENVIRONMENT_ERROR, reason)
        result.machine_fault = True
    else:
        result = RunResult(RunStatus.FAILED, HaltType.INTERNAL_ERROR, reason, trace=trace or None)
    result.journaled = True
    return result


async def run_attempts(plan: RunPlan, fx: Effects) -> RunResult:
    """Preflight, arm, then the attempts until one lands, halts or recovery is spent."""
    contract = plan.contract
    # The base is journaled so a recovery can tell whether this run already landed.
    started: dict[str, JsonValue] = {
        "run_id": plan.run_id,
        "seats": contract.seats,
        "base_commit": plan.base_commit,
    }
    await _emit(fx, plan, EventKind.RUN_STARTED, {**started, "base_branch": plan.base_branch})
    unresolved = await fx.preflight(plan)
    await fx.arm(plan)
    if not contract.verified:
        await fx.fire(FireCall(plan, CanonicalHalt.VERIFICATION_GAP, VERIFICATION_GAP_EVIDENCE))
    if unresolved:
        evidence = "anchors do not resolve at the base commit: " + ", ".join(unresolved)
        await fx.fire(FireCall(plan, CanonicalHalt.ANCHOR_RESOLUTION_FAILURE, evidence))
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
        await _emit(fx, plan, EventKind.ATTEMPT_STARTED, {"attempt": attempt})
        for number in range(1, contract.seats + 1):  # recorded before it runs: counts stay exact
            coder = contract.coder_for_seat(number).kind.value
            await _emit(
                fx,
                plan,
                EventKind.DISPATCH_STARTED,
                {"attempt": attempt, "seat": number, "coder": coder},
            )
        seats = list(
            await asyncio.gather(
                *(
                    fx.dispatch(SeatCall(plan, attempt, seat, prompt))
                    for seat in range(1, contract.seats + 1)
                )
            )
        )
        run.dispatches.extend(seats)
        for seat in seats:
            await _emit(fx, plan, EventKind.SEAT_FINISHED, seat_event(seat))
            if hit_budget(seat):
                await fx.fire(
                    FireCall(
                        plan,
                        CanonicalHalt.BUDGET_EXHAUSTED,
                        f"attempt {attempt} seat {seat.seat}: {budget_detail(seat)}",
                    )
                )
        spent = spending_exhausted(seats)
        if spent is not None and contract.budgets.on_exhausted is BudgetAction.HOLD:
            run.attempts.append(record_attempt(attempt, seats, [], fault=True, failures=[spent]))
            run.fired = await fx.fired_halts(plan)
            return end_run(
                run,
                RunStatus.BLOCKED,
                HaltType.ESCALATE,
                f"budget exhausted: {spent}; the task is held for a human",
                halted=True,
            )
        run.fired = await fx.fired_halts(plan)
        blocking = [h for h in run.fired if h.severity is HaltSeverity.BLOCK]
        if blocking:
            names = ", ".join(f"{h.name} ({h.detail})" for h in blocking)
            run.attempts.append(record_attempt(attempt, seats, [], fault=True, failures=[names]))
            return end_run(
                run, RunStatus.BLOCKED, HaltType.ESCALATE, f"block halt fired: {names}", halted=True
            )
        unset = [s for s in seats if s.lost_to_setting]
        if unset:  # every later wave would meet it again: the operator's to fix
            problems = [f"seat {s.seat} ({s.coder}): {s.dispatch.setting_error}" for s in unset]
            return cannot_run(run, attempt, seats, problems)

        viable = [s for s in seats if s.viable]
        refuted: list[ValidatorResult] = []
        if not viable and claims_no_change(seats):
            checked = await verify_noop(plan, fx, run, attempt, seats)
            if isinstance(checked, RunResult):
                return checked
            refuted = checked
        if not viable:
            ended = no_candidate(run, attempt, seats, failures, refuted)
            if ended is not None:
                return ended
            empty = empty_wave_signatures(run, attempt)
            stuck = empty is not None and empty == previous
            going, why = AttemptNext.RECOVER, f"attempt {attempt + 1} of {waves} follows"
            if stuck:
                going, why = (
                    AttemptNext.END,
                    (f"stuck: attempt {attempt} failed exactly as attempt {attempt - 1} did"),
                )
            elif attempt == waves:
                going, why = AttemptNext.END, "no attempt produced a change"
            if refuted and run.winner is not None:  # the validators decided: say what failed
                decided = refuted_decision(attempt, run.winner.seat, refuted, going, why)
                await _emit(fx, plan, EventKind.ATTEMPT_DECIDED, decided)
            if stuck:
                return await _end_blocked(plan, fx, run, why)
            previous = empty
            if going is AttemptNext.END:
                return end_run(run, RunStatus.BLOCKED, HaltType.BLOCKER, why)
            continue

        if len(viable) > 1 and contract.judges > 0:
            judged = await _judge(plan, fx, run, attempt, seats, viable)
            if isinstance(judged, RunResult):
                return judged
            chosen, outcomes = judged, await fx.validate(CandidateCall(plan, judged))
            run.validations += 1
        else:
            chosen, outcomes = await _validate_best(plan, fx, viable)
            run.validations += len(viable)
        run.winner = chosen
        for outcome in outcomes:
            if outcome.fire is not None:
                evidence = outcome.evidence or outcome.result.justification
                await fx.fire(FireCall(plan, outcome.fire, evidence))
        results = [o.result for o in outcomes]
        run.validator_results = results
        lost = judge_validator_lost(run, attempt, seats, outcomes)
        if lost is not None:
            return lost
        decision = decide(results, contract.policy, contract.threshold)
        run.policy_decision = decision
        signatures = finding_signatures(blocking_findings(results))
        failed = [r for r in results if r.halts or r.blocks]
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
        going, why = next_step(decision, halted_by, stuck, attempt, waves)
        await _emit(
            fx,
            plan,
            EventKind.ATTEMPT_DECIDED,
            {
                "attempt": attempt,
                "outcome": run.attempts[-1].outcome.value,
                "action": decision.action.value,
                "next": going.value,
                "why": why,
                "seat": chosen.seat,
                "failures": [failure_summary(r) for r in failed],
            },
        )
        if halted_by:
            run.fired = await fx.fired_halts(plan)
            return end_run(run, RunStatus.BLOCKED, HaltType.ESCALATE, why, halted=True)
        if decision.action is PolicyAction.PROCEED:
            run.land = await fx.land(LandCall(plan, chosen, attempts=list(run.attempts)))
            run.validations += run.land.validations
            return landed(run)
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


async def _judge(
    plan: RunPlan,
    fx: Effects,
    run: RunResult,
    attempt: int,
    seats: list[Candidate],
    viable: list[Candidate],
) -> Candidate | RunResult:
    """Blind judges rank the viable candidates; the winner, or the run stalled without quorum."""
    panel = await fx.judge(JudgeCall(plan, attempt, viable))
    run.tally = panel.tally
    run.labels.update(panel.labels)
    run.judge_calls += panel.calls
    tally = panel.tally
    await _emit(
        fx,
        plan,
        EventKind.JUDGES_RANKED,
        {
            "attempt": attempt,
            "winner": tally.winner,
            "present": tally.present,
            "quorum": tally.quorum,
            "lost_to_quota": panel.lost_to_quota,
            "lost_to_fault": panel.lost_to_fault,
        },
    )
    if panel.budget is not None:  # the judges spent the run's budget: held, as by a coder
        await fx.fire(FireCall(plan, CanonicalHalt.BUDGET_EXHAUSTED, f"judges: {panel.budget}"))
        run.attempts.append(record_attempt(attempt, seats, [], fault=True, failures=[panel.budget]))
        run.fired = await fx.fired_halts(plan)
        return end_run(
            run,
            RunStatus.BLOCKED,
            HaltType.ESCALATE,
            f"budget exhausted: {panel.budget}; the task is held for a human",
            halted=True,
        )
    if panel.setting_errors:  # a judge this machine cannot run: the panel is not as set
        return cannot_run(run, attempt, seats, list(panel.setting_errors))
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


async def _validate_best(
    plan: RunPlan, fx: Effects, viable: list[Candidate]
) -> tuple[Candidate, list[Validation]]:
    """Validate every viable candidate; keep the first (by seat) that proceeds, else the first."""
    judged = [(seat, await fx.validate(CandidateCall(plan, seat))) for seat in viable]
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
        call = LandCall(plan, run.winner, blocked=True, failures=list(last.failures))
        run.land = await fx.land(call)
        if run.land.left_pr:
            run.reason = f"{reason}; left for review as {run.land.pr_url}"
    return run


async def _emit(fx: Effects, plan: RunPlan, kind: EventKind, data: dict[str, JsonValue]) -> None:
    await fx.emit(RunEvent(kind, data, run_id=plan.run_id))
