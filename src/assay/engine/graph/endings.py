"""How a run ends: the result built from the run's record and how it ended (:func:`end_run`),
the next step after a decided wave and why, what its landing came to, a setting this machine
cannot run, a judge validator lost to its provider. Pure: nothing here performs an effect."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from assay.core.policy import PolicyDecision
from assay.core.preflight import unrunnable_reason
from assay.core.results import ValidatorResult
from assay.core.vocab import AttemptNext, HaltType, PolicyAction, RunStatus
from assay.engine.graph.records import record_attempt
from assay.engine.run_result import RunResult
from assay.engine.values import Candidate, LandOutcome, Validation


def end_run(
    run: RunResult,
    status: RunStatus,
    halt_type: HaltType,
    reason: str,
    *,
    halted: bool = False,
    land: LandOutcome | None = None,
    quota_hit: bool = False,
    quota_reset_at: datetime | None = None,
    machine_fault: bool = False,
    no_viable_candidates: bool = False,
    unrunnable: bool = False,
    land_refused: bool = False,
) -> RunResult:
    """The run's result: its record so far (``run``: the attempts, dispatches, validations,
    the chosen candidate) with how it ended, the facts settle reads set here and only here."""
    return replace(
        run,
        status=status,
        halt_type=halt_type,
        reason=reason,
        halted=halted,
        land=land,
        quota_hit=quota_hit,
        quota_reset_at=quota_reset_at,
        machine_fault=machine_fault,
        no_viable_candidates=no_viable_candidates,
        unrunnable=unrunnable,
        land_refused=land_refused,
    )


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
    recorded = record_attempt(attempt, seats, results or [], fault=True, failures=problems)
    run.attempts.append(recorded)
    reason = unrunnable_reason(problems)
    return end_run(run, RunStatus.FAILED, HaltType.ENVIRONMENT_ERROR, reason, unrunnable=True)


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
        detail = "; ".join(q.detail for q in quota)
        run.attempts.append(record_attempt(attempt, seats, results, fault=True, failures=[detail]))
        reason = f"a judge hit its quota: {detail}"
        reset = _latest([q.reset_at for q in quota])
        return end_run(
            run,
            RunStatus.STALLED,
            HaltType.ENVIRONMENT_ERROR,
            reason,
            quota_hit=True,
            quota_reset_at=reset,
        )
    if faults:
        detail = "; ".join(faults)
        run.attempts.append(record_attempt(attempt, seats, results, fault=True, failures=[detail]))
        reason = f"a judge was lost to a provider fault: {detail}"
        return end_run(
            run, RunStatus.FAILED, HaltType.ENVIRONMENT_ERROR, reason, machine_fault=True
        )
    return None


def landed(run: RunResult, land: LandOutcome) -> RunResult:
    """End a run whose candidate passed on what its landing did. A landing that failed on a
    machine fault is refunded (the task lands again later); a refused one goes to a human."""
    if land.machine_fault:
        reason = f"the landing failed on a machine fault; the task lands again later: {land.detail}"
        return end_run(
            run, RunStatus.FAILED, HaltType.ENVIRONMENT_ERROR, reason, land=land, machine_fault=True
        )
    if land.refused:
        # Blocked by the landing alone: say first that the change itself passed.
        reason = f"the validators passed; {land.refusal}: {land.detail}"
        return end_run(
            run, RunStatus.BLOCKED, HaltType.ESCALATE, reason, land=land, land_refused=True
        )
    # Blocked here: the base branch moved and the change does not hold on its tip.
    moved = land.status is RunStatus.BLOCKED
    halt_type = HaltType.BLOCKER if moved else HaltType.NONE
    return end_run(run, land.status, halt_type, land.detail, land=land)


def _latest(times: list[datetime | None]) -> datetime | None:
    known = [t for t in times if t is not None]
    return max(known) if known else None
