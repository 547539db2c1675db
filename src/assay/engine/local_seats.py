"""The local executor's seat work: one coder's dispatch, and the checks of its candidate.

What crosses the boundary is the :class:`~assay.engine.outcomes.Candidate`; what stays here,
on the worker, is the :class:`SeatWork` (the coder's full result, the diff, the seat's
repository), kept by :class:`~assay.engine.local.LocalEffects` for the judges and the lander.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from assay.adapters import git
from assay.adapters.coders import get_coder, ignored_settings
from assay.adapters.coders.base import DispatchRequest, DispatchResult
from assay.adapters.envpolicy import child_environment, model_environment
from assay.adapters.process import EnvironmentFault
from assay.adapters.redact import Redactor, redactions
from assay.adapters.run_files import fault_of, make_folder
from assay.adapters.validators import get_validator
from assay.adapters.validators.base import ValidationContext, ValidationOutcome
from assay.core.brief import render_brief
from assay.core.changes import ChangeSet
from assay.core.report import compare_with_diff
from assay.core.vocab import CanonicalHalt, CrashPoint, EventKind, ValidatorKind
from assay.engine.accounting import validator_event
from assay.engine.effects import FireCall, SeatCall
from assay.engine.interrupt import boundary
from assay.engine.outcomes import Candidate, RunEvent, RunPlan
from assay.engine.seat_results import (
    candidate_of,
    captured_output,
    environment_failed,
    tampered_outcome,
    with_final_answer,
)

if TYPE_CHECKING:
    from assay.engine.local import LocalEffects


@dataclass(frozen=True)
class SeatWork:
    """What one dispatch left on this worker: the coder's result (its log too) and the change
    with its diff, in the seat's repository ``worktree``."""

    result: DispatchResult
    change: ChangeSet
    worktree: Path


async def dispatch_seat(fx: LocalEffects, call: SeatCall) -> Candidate:
    plan, attempt, seat = call.plan, call.attempt, call.seat
    spec = plan.contract.coder_for_seat(seat)
    repo = await asyncio.to_thread(fx.seating.prepare, plan, seat, attempt)
    worktree = repo.path
    boundary(CrashPoint.DISPATCH_STARTED)
    seat_dir = fx.run_dir(plan) / f"attempt-{attempt}" / f"seat-{seat}"
    try:
        make_folder(seat_dir)
    except EnvironmentFault as exc:  # no folder for the seat: its environment error
        unmade: EnvironmentFault | None = exc
    else:
        unmade = None
    report_path = seat_dir / "report.json"
    report_folder = seat_dir.resolve()
    with contextlib.suppress(OSError):  # whatever is there, the coder's report is read fresh
        report_path.unlink(missing_ok=True)
    relay = await asyncio.to_thread(fx.halts.open_relay, plan, attempt, seat)
    request = DispatchRequest(
        worktree=worktree,
        prompt=call.prompt,
        dispatch_id=plan.dispatch_id,
        attempt=attempt,
        seat=seat,
        halt_state_dir=fx.state_dir(),
        report_path=report_path,
        log_dir=seat_dir,
        env=fx.coder_env(plan, seat, relay.path if relay else None),
        settings=spec.model_dump(mode="json"),
        timeout_seconds=spec.timeout_seconds,
        max_turns=spec.max_turns,
        repo_root=plan.repo_root,
        validator_commands={
            v.id: v.run
            for v in plan.contract.validators
            if v.kind is ValidatorKind.COMMAND and v.run
        },
        brief=render_brief(plan.contract, spec.kind),
        sandbox=fx.seating.coder_sandbox(plan, seat, seat_dir, relay.folder if relay else None),
        home=repo.home.resolve(),
    )
    coder = None
    if unmade is not None:
        result = environment_failed(unmade)
    else:
        try:
            coder = get_coder(spec.kind.value)
        except Exception as exc:  # an unknown or broken adapter: this seat's environment error
            result = DispatchResult(exit_code=None, environment_error=str(exc))
    if coder is not None:
        for setting in ignored_settings(spec, coder):
            fx.warn(f"seat {seat}: the {spec.kind.value} coder ignores `{setting}`")
        try:
            result = await asyncio.to_thread(coder.dispatch, request)
        except EnvironmentFault as exc:  # the machine failed the coder: refunded, named
            result = environment_failed(exc)
        except OSError as exc:  # assay's own write for the seat (its prompt, its transcript)
            fault = fault_of(exc, seat_dir)
            if fault is None:
                raise
            result = environment_failed(fault)
    await asyncio.to_thread(fx.halts.close_relay, attempt, seat)  # its coder has ended
    # Before any git command of assay's there: the seat's .git as assay left it.
    tampered = await asyncio.to_thread(fx.seating.secure, seat)
    if tampered is not None:  # reaching past the seat through its .git: a scope breach
        fx.warn(f"attempt {attempt}, seat {seat}: {tampered}")
        result.error = "; ".join(filter(None, [result.error, tampered]))
        await fx.fire(FireCall(plan, CanonicalHalt.SCOPE_BREACH, f"seat {seat}: {tampered}"))
        change = ChangeSet(base_commit=plan.base_commit, files=[], diff="")
    else:
        change = await asyncio.to_thread(git.read_changes, worktree, plan.base_commit)
        # A checkpoint commit fixes the candidate, so validators' side effects can be undone.
        message = f"assay: attempt {attempt}, seat {seat}"
        await asyncio.to_thread(git.commit_all, worktree, message)
        await asyncio.to_thread(fx.seating.record_candidate, plan, attempt, seat)
    boundary(CrashPoint.DISPATCH_ENDED)
    report = with_final_answer(
        fx.read_report(attempt, seat, report_path, report_folder), result.report
    )
    fx.work[(attempt, seat)] = SeatWork(result=result, change=change, worktree=worktree)
    return candidate_of(
        seat=seat,
        attempt=attempt,
        coder=spec.kind.value,
        result=result,
        change=change,
        commit=fx.seating.candidates.get((attempt, seat)),
        report=report,
        comparison=compare_with_diff(report, change.paths)
        if report
        else compare_with_diff(None, []),
    )


async def validate_seat(
    fx: LocalEffects, plan: RunPlan, attempt: int, seat: int, change: ChangeSet | None = None
) -> list[ValidationOutcome]:
    """Every check of the seat's candidate of ``attempt`` (``change``: another tree in the
    seat, a revalidation's), the secrets it found redacted from the run's files."""
    work = fx.work[(attempt, seat)]
    change = change if change is not None else work.change
    contract = plan.contract
    env = child_environment(fx.operator_env, declared=contract.env)
    log_dir = fx.run_dir(plan) / f"attempt-{attempt}" / f"seat-{seat}" / "validators"
    make_folder(log_dir)  # EnvironmentFault: the attempt's environment error, refunded
    captured = captured_output(work.result)
    checks: list[tuple[str, Mapping[str, object]]] = [
        ("scope", {"id": "scope", **contract.scope.model_dump(mode="json")}),
        ("secrets", {"id": "secrets", "mode": contract.secrets.value}),
    ]
    checks += [(v.kind.value, v.model_dump(mode="json")) for v in contract.validators]
    coder_ignored = await asyncio.to_thread(git.ignored_entries, work.worktree)
    outcomes: list[ValidationOutcome] = []
    # The secret scan also looks for the exact values of the coder's own credentials
    # (for the llm coder, the key assay read for it, which its commands never saw).
    spec = plan.contract.coder_for_seat(seat)
    coder_env = model_environment(
        fx.operator_env,
        spec.kind.value,
        spec.model_dump(mode="json"),
        declared=contract.env,
    )
    sandbox = fx.seating.validator_sandbox(plan, seat, log_dir)
    for kind, settings in checks:
        context = ValidationContext(
            worktree=work.worktree,
            change=change,
            task=contract.task,
            env=coder_env if kind == "secrets" else env,
            settings=settings,
            log_dir=log_dir,
            captured_output=captured,
            sandbox=sandbox,
        )
        validator = get_validator(kind)
        outcome = await asyncio.to_thread(validator.validate, context)
        outcomes.append(outcome)
        # The event carries the verdict's text: a secret this seat's scan found is cut from it
        # now (the run learns it, and redacts its files, once every check is done).
        data = validator_event(attempt, seat, outcome.result)
        found = {(s.type, s.value) for o in outcomes for s in o.secrets}
        if found:
            data = Redactor(redactions(found)).data(data)
        await fx.emit(RunEvent(EventKind.VALIDATOR_FINISHED, data))
    # The validators ran the coder's code in the seat: its .git is checked again.
    tampered = await asyncio.to_thread(fx.seating.secure, seat)
    if tampered is not None:
        fx.warn(f"attempt {attempt}, seat {seat}: {tampered}")
        outcomes.append(tampered_outcome(tampered))
    else:
        await asyncio.to_thread(git.restore_checkpoint, work.worktree, coder_ignored)
    outcomes = await asyncio.to_thread(fx.redact_secrets, plan, outcomes)
    fx.results.setdefault((attempt, seat), [o.result for o in outcomes])
    fx.seating.record_checks(attempt, seat, [o.result for o in outcomes])
    boundary(CrashPoint.VALIDATED)
    return outcomes
