"""How a decided attempt ends a run: the next step and why, what its landing came to, a judge
validator lost to its provider. Pure: the graph calls these, nothing here performs an effect."""

from __future__ import annotations

from datetime import datetime

from assay.core.policy import PolicyDecision
from assay.core.preflight import unrunnable_reason
from assay.core.results import ValidatorResult
from assay.core.vocab import AttemptNext, HaltType, PolicyAction, RunStatus
from assay.engine.graph.records import record_attempt
from assay.engine.run_result import RunResult, end_run
from assay.engine.values import Candidate, Validation


def next_step(
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


def cannot_run(
    run: RunResult,
    attempt: int,
    seats: list[Candidate],
    problems: list[str],
    results: list[ValidatorResult] | None = None,
) -> RunResult:
    """End a run that met a setting this machine cannot run (a program not installed or hidden
    by the sandbox, a key not set or refused): settle's ``unrunnable`` row holds the task with
    the problems and gives the attempt back; nothing retries it until the operator fixes the
    setting and releases it."""
    run.unrunnable = True
    recorded = record_attempt(attempt, seats, results or [], fault=True, failures=problems)
    run.attempts.append(recorded)
    reason = unrunnable_reason(problems)
    return end_run(run, RunStatus.FAILED, HaltType.ENVIRONMENT_ERROR, reason)


def judge_validator_lost(
    run: RunResult, attempt: int, seats: list[Candidate], outcomes: list[Validation]
) -> RunResult | None:
    """A judge validator lost to its provider (quota, or a fault that outlived the retries) is
    a machine fact, not a verdict on the task: the run ends refunded, the fault named. One
    that a setting kept from running (no key) holds the task instead."""
    results = [o.result for o in outcomes]
    unset = [o.setting_error for o in outcomes if o.setting_error is not None]
    if unset:
        return cannot_run(run, attempt, seats, unset, results)
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


def landed(run: RunResult) -> RunResult:
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
