"""run_graph(): one run of a task, written only against :class:`Effects`.

Deterministic: the same plan and the same effect results give the same decisions, whether the
effects run in-process or as Temporal activities. Order of a run: open it; preflight and arm;
then its waves (:func:`~assay.engine.graph.wave.wave`: dispatch every seat, read the halts
back, choose and check a candidate, decide) until one lands, ends the run or recovery is
spent; then record what it came to.
"""

from __future__ import annotations

import traceback

from pydantic import JsonValue

from assay.core.vocab import CanonicalHalt, EventKind, HaltType, RunStatus
from assay.engine.effects import (
    EffectFault,
    Effects,
    FaultKind,
    FireCall,
    OpenRequest,
    RecordCall,
    RunRecorded,
    RunStopped,
)
from assay.engine.graph.wave import Recovery, emit, end_blocked, wave
from assay.engine.run_result import RunResult
from assay.engine.values import RunPlan

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
        return RunResult(
            RunStatus.FAILED, HaltType.ENVIRONMENT_ERROR, reason, machine_fault=True, journaled=True
        )
    return RunResult(
        RunStatus.FAILED, HaltType.INTERNAL_ERROR, reason, trace=trace or None, journaled=True
    )


async def run_attempts(plan: RunPlan, fx: Effects) -> RunResult:
    """Preflight, arm, then the waves until one lands, ends the run or recovery is spent."""
    refused = await arm(plan, fx)
    if refused is not None:
        return refused
    run = RunResult(RunStatus.BLOCKED, HaltType.BLOCKER, "")  # the record the waves fill in
    waves = 1 + plan.contract.budgets.max_recovery
    came = Recovery()
    for attempt in range(1, waves + 1):
        step = await wave(plan, fx, run, attempt, waves, came)
        if isinstance(step, RunResult):
            return step
        came = step
    decided = run.policy_decision
    return await end_blocked(
        plan,
        fx,
        run,
        f"validators still block after {waves} attempt(s): {decided.justification}"
        if decided
        else f"no passing candidate after {waves} attempt(s)",
    )


async def arm(plan: RunPlan, fx: Effects) -> RunResult | None:
    """The run started: its anchors checked at the base commit and its halts armed. A contract
    with no validator that verifies the change fires the verification gap; an anchor that does
    not resolve ends the run, escalated."""
    contract = plan.contract
    # The base is journaled so a recovery can tell whether this run already landed.
    started: dict[str, JsonValue] = {
        "run_id": plan.run_id,
        "seats": contract.seats,
        "base_commit": plan.base_commit,
        "base_branch": plan.base_branch,
    }
    if plan.origin is not None:  # the base branch is the origin's: recovery looks there
        started["origin"] = plan.origin
    await emit(fx, plan, EventKind.RUN_STARTED, started)
    unresolved = await fx.preflight(plan)
    await fx.arm(plan)
    if not contract.verified:
        await fx.fire(FireCall(plan, CanonicalHalt.VERIFICATION_GAP, VERIFICATION_GAP_EVIDENCE))
    if not unresolved:
        return None
    evidence = "anchors do not resolve at the base commit: " + ", ".join(unresolved)
    await fx.fire(FireCall(plan, CanonicalHalt.ANCHOR_RESOLUTION_FAILURE, evidence))
    fired = await fx.fired_halts(plan)
    return RunResult(RunStatus.BLOCKED, HaltType.ESCALATE, evidence, halted=True, fired=fired)
