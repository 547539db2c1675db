"""Which candidate of a wave the validators decide on: the blind judges' winner when several
are viable and the contract has judges, else the first (by seat) the validators pass."""

from __future__ import annotations

from pydantic import JsonValue

from assay.core.policy import decide
from assay.core.vocab import CanonicalHalt, EventKind, HaltType, PolicyAction, RunStatus
from assay.engine.effects import CandidateCall, Effects, FireCall, JudgeCall
from assay.engine.graph.endings import cannot_run, end_run
from assay.engine.graph.records import record_attempt
from assay.engine.run_result import RunResult
from assay.engine.values import Candidate, JudgeSaid, RunEvent, RunPlan, Validation


async def choose(
    plan: RunPlan,
    fx: Effects,
    run: RunResult,
    attempt: int,
    seats: list[Candidate],
    viable: list[Candidate],
) -> tuple[Candidate, list[Validation]] | RunResult:
    """The chosen candidate and its validations (the halts they call for fired), or the run
    ended by the judges (a spent budget, a judge that cannot run, no quorum)."""
    if len(viable) > 1 and plan.contract.judges > 0:
        judged = await judge(plan, fx, run, attempt, seats, viable)
        if isinstance(judged, RunResult):
            return judged
        chosen, outcomes = judged, await fx.validate(CandidateCall(plan, judged))
        run.validations += 1
    else:
        chosen, outcomes = await validate_best(plan, fx, viable)
        run.validations += len(viable)
    run.winner = chosen
    for outcome in outcomes:
        if outcome.fire is not None:
            evidence = outcome.evidence or outcome.result.justification
            await fx.fire(FireCall(plan, outcome.fire, evidence))
    run.validator_results = [o.result for o in outcomes]
    return chosen, outcomes


async def judge(
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
    ranked: dict[str, JsonValue] = {
        "attempt": attempt,
        "winner": tally.winner,
        "present": tally.present,
        "quorum": tally.quorum,
        "lost_to_quota": panel.lost_to_quota,
        "lost_to_fault": panel.lost_to_fault,
        "first_choices": dict(tally.first_choices),
        "borda": dict(tally.borda),
        "tie_break": tally.tie_break.value if tally.tie_break else None,
        "judges": [_said(s) for s in panel.said],
    }
    await fx.emit(RunEvent(EventKind.JUDGES_RANKED, ranked, run_id=plan.run_id))
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
    reason = f"no quorum: {tally.present} usable ranking(s) of {tally.quorum} needed" + (
        f", {panel.lost_to_quota} judge(s) lost to quota" if panel.lost_to_quota else ""
    )
    if panel.lost_to_fault:
        reason += f", {panel.lost_to_fault} judge(s) lost to a provider fault"
    if panel.problems:
        reason += (": " if lost else "; ") + "; ".join(panel.problems)
    run.attempts.append(record_attempt(attempt, seats, [], fault=True, failures=[reason]))
    return end_run(
        run,
        RunStatus.FAILED if machine and not quota else RunStatus.STALLED,
        HaltType.ENVIRONMENT_ERROR if machine else HaltType.VALIDATOR_ERROR,
        reason,
        quota_hit=quota,
        quota_reset_at=panel.quota_reset_at if quota else None,
        machine_fault=machine and not quota,
    )


async def validate_best(
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


def _said(said: JudgeSaid) -> dict[str, JsonValue]:
    """A judge's answer in the ``judges.ranked`` event (its reasons as bounded as the panel
    kept them)."""
    return {
        "judge": said.judge,
        "name": said.name,
        "round": said.round,
        "ranking": list(said.ranking) if said.ranking is not None else None,
        "reasons": said.reasons,
        "reasons_cut": said.reasons_cut,
        "error": said.error,
    }
