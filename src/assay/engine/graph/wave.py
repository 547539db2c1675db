"""One wave of a run: every seat dispatched on the same prompt, the halts they fired read back,
a candidate chosen and checked, and the policy's decision. A wave comes to the run's end (a
:class:`RunResult`) or to a :class:`Recovery`: what the next wave's prompt says failed."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

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
from assay.engine.effects import Effects, FireCall, LandCall, SeatCall
from assay.engine.graph.choose import choose
from assay.engine.graph.empty_wave import (
    claims_no_change,
    empty_wave_signatures,
    no_candidate,
    refuted_decision,
    verify_noop,
)
from assay.engine.graph.endings import cannot_run, end_run, judge_validator_lost, landed, next_step
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
from assay.engine.run_result import RunResult
from assay.engine.values import Candidate, RunEvent, RunPlan, Validation


@dataclass(frozen=True)
class Recovery:
    """A wave that calls for another: every failure so far (the next prompt lists them) and the
    wave's finding signatures (a next wave that fails exactly the same is stuck; None when
    its seats were lost to a machine fact, which says nothing about being stuck)."""

    failures: tuple[PriorFailure, ...] = ()
    signatures: list[str] | None = None


async def wave(
    plan: RunPlan, fx: Effects, run: RunResult, attempt: int, waves: int, before: Recovery
) -> RunResult | Recovery:
    """Wave ``attempt`` of ``waves``, after ``before``; ``run`` is the run's record so far
    (its attempts, dispatches and counts grow here)."""
    if attempt > 1:
        run.recovery_waves += 1
    prompt = recovery_spec(plan.contract.task, before.failures)
    seats = await dispatch(plan, fx, attempt, prompt)
    run.dispatches.extend(seats)
    stopped = await read_back(plan, fx, run, attempt, seats)
    if stopped is not None:
        return stopped
    viable = [s for s in seats if s.viable]
    if not viable:
        return await _unchanged(plan, fx, run, attempt, waves, seats, before)
    chosen = await choose(plan, fx, run, attempt, seats, viable)
    if isinstance(chosen, RunResult):
        return chosen
    return await _decided(plan, fx, run, attempt, waves, seats, chosen, before)


async def dispatch(plan: RunPlan, fx: Effects, attempt: int, prompt: str) -> list[Candidate]:
    """Every seat run at once on ``prompt``; each one's end said, and a budget it hit fired."""
    contract = plan.contract
    await emit(fx, plan, EventKind.ATTEMPT_STARTED, {"attempt": attempt})
    for number in range(1, contract.seats + 1):  # recorded before it runs: counts stay exact
        coder = contract.coder_for_seat(number).kind.value
        started: dict[str, JsonValue] = {"attempt": attempt, "seat": number, "coder": coder}
        await emit(fx, plan, EventKind.DISPATCH_STARTED, started)
    calls = (SeatCall(plan, attempt, seat, prompt) for seat in range(1, contract.seats + 1))
    seats = list(await asyncio.gather(*(fx.dispatch(call) for call in calls)))
    for seat in seats:
        await emit(fx, plan, EventKind.SEAT_FINISHED, seat_event(seat))
        if hit_budget(seat):
            evidence = f"attempt {attempt} seat {seat.seat}: {budget_detail(seat)}"
            await fx.fire(FireCall(plan, CanonicalHalt.BUDGET_EXHAUSTED, evidence))
    return seats


async def read_back(
    plan: RunPlan, fx: Effects, run: RunResult, attempt: int, seats: list[Candidate]
) -> RunResult | None:
    """The halts the wave fired, read back. A spending budget spent under ``hold``, a block
    halt, or a seat this machine cannot run as set ends the run here."""
    spent = spending_exhausted(seats)
    if spent is not None and plan.contract.budgets.on_exhausted is BudgetAction.HOLD:
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
        reason = f"block halt fired: {names}"
        return end_run(run, RunStatus.BLOCKED, HaltType.ESCALATE, reason, halted=True)
    unset = [s for s in seats if s.lost_to_setting]
    if unset:  # every later wave would meet it again: the operator's to fix
        problems = [f"seat {s.seat} ({s.coder}): {s.dispatch.setting_error}" for s in unset]
        return cannot_run(run, attempt, seats, problems)
    return None


async def _unchanged(
    plan: RunPlan,
    fx: Effects,
    run: RunResult,
    attempt: int,
    waves: int,
    seats: list[Candidate],
    before: Recovery,
) -> RunResult | Recovery:
    """A wave with no viable candidate: a verified no-op, a machine fact, or a recovery."""
    refuted: list[ValidatorResult] = []
    if claims_no_change(seats):
        checked = await verify_noop(plan, fx, run, attempt, seats)
        if isinstance(checked, RunResult):
            return checked
        refuted = checked
    failures = list(before.failures)
    ended = no_candidate(run, attempt, seats, failures, refuted)
    if ended is not None:
        return ended
    empty = empty_wave_signatures(run, attempt)
    stuck = empty is not None and empty == before.signatures
    going, why = AttemptNext.RECOVER, f"attempt {attempt + 1} of {waves} follows"
    if stuck:
        going, why = (
            AttemptNext.END,
            f"stuck: attempt {attempt} failed exactly as attempt {attempt - 1} did",
        )
    elif attempt == waves:
        going, why = AttemptNext.END, "no attempt produced a change"
    if refuted and run.winner is not None:  # the validators decided: say what failed
        decided = refuted_decision(attempt, run.winner.seat, refuted, going, why)
        await emit(fx, plan, EventKind.ATTEMPT_DECIDED, decided)
    if stuck:
        return await end_blocked(plan, fx, run, why)
    if going is AttemptNext.END:
        return end_run(run, RunStatus.BLOCKED, HaltType.BLOCKER, why)
    return Recovery(tuple(failures), empty)


async def _decided(
    plan: RunPlan,
    fx: Effects,
    run: RunResult,
    attempt: int,
    waves: int,
    seats: list[Candidate],
    chosen: tuple[Candidate, list[Validation]],
    before: Recovery,
) -> RunResult | Recovery:
    """The policy's decision on the chosen candidate: land it, end the run, or recover."""
    candidate, outcomes = chosen
    lost = judge_validator_lost(run, attempt, seats, outcomes)
    if lost is not None:
        return lost
    contract = plan.contract
    results = [o.result for o in outcomes]
    decision = decide(results, contract.policy, contract.threshold)
    run.policy_decision = decision
    signatures = finding_signatures(blocking_findings(results))
    failed = [r for r in results if r.halts or r.blocks]
    failures = [f"{r.validator_id}: {failure_detail(r)}" for r in failed]
    record = record_attempt(
        attempt, seats, results, fault=False, failures=failures, signatures=signatures
    )
    run.attempts.append(record)
    halted_by = [o.fire.value for o in outcomes if o.fire is not None]
    stuck = before.signatures is not None and signatures == before.signatures
    going, why = next_step(decision, halted_by, stuck, attempt, waves)
    said: dict[str, JsonValue] = {
        "attempt": attempt,
        "outcome": record.outcome.value,
        "action": decision.action.value,
        "next": going.value,
        "why": why,
        "seat": candidate.seat,
        "failures": [failure_summary(r) for r in failed],
    }
    await emit(fx, plan, EventKind.ATTEMPT_DECIDED, said)
    if halted_by:
        run.fired = await fx.fired_halts(plan)
        return end_run(run, RunStatus.BLOCKED, HaltType.ESCALATE, why, halted=True)
    if decision.action is PolicyAction.PROCEED:
        land = await fx.land(LandCall(plan, candidate, attempts=list(run.attempts)))
        run.validations += land.validations
        return landed(run, land)
    if decision.action is PolicyAction.HALT:
        return end_run(run, RunStatus.FAILED, HaltType.VALIDATOR_ERROR, decision.justification)
    if stuck:
        return await end_blocked(plan, fx, run, why)
    recovered = (
        PriorFailure(attempt=attempt, source=r.validator_id, detail=failure_detail(r))
        for r in failed
    )
    return Recovery((*before.failures, *recovered), signatures)


async def end_blocked(plan: RunPlan, fx: Effects, run: RunResult, reason: str) -> RunResult:
    """The validators still block (recovery spent, or stuck). Under ``land: pr`` the last chosen
    candidate is left as a draft pull request listing the failures, so a human reviews it:
    the run stays blocked and settle's ``blocked_with_pr`` row holds the task."""
    last = run.attempts[-1] if run.attempts else None
    winner = run.winner
    # Only a candidate of the last attempt: its failures are the ones the PR lists.
    if plan.contract.land is not LandMode.PR or not (
        winner and last and winner.attempt == last.attempt
    ):
        return end_run(run, RunStatus.BLOCKED, HaltType.BLOCKER, reason)
    call = LandCall(plan, winner, blocked=True, failures=list(last.failures))
    land = await fx.land(call)
    if land.left_pr:
        reason = f"{reason}; left for review as {land.pr_url}"
    return end_run(run, RunStatus.BLOCKED, HaltType.BLOCKER, reason, land=land)


async def emit(fx: Effects, plan: RunPlan, kind: EventKind, data: dict[str, JsonValue]) -> None:
    await fx.emit(RunEvent(kind, data, run_id=plan.run_id))
