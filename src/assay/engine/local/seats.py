"""The local executor's seat work: one coder's dispatch, its capture, and the checks of its
candidate.

What crosses the boundary is the :class:`~assay.engine.values.Candidate`; what stays here,
on the worker, is the :class:`SeatWork` (the coder's full result, the diff, the candidate's
commit in the seat's candidate store), kept by
:class:`~assay.engine.local.site.RunSite` for
the judges and the lander. The candidate is what the collector captured inside the seat's
sandbox; every check looks at exactly that tree (a command validator in a fresh checkout of it
with a fresh home), never at the coder's seat.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from assay.adapters import seats
from assay.adapters.candidates import CaptureRejected
from assay.adapters.capture import Capture
from assay.adapters.coders import get_coder, ignored_settings
from assay.adapters.coders.base import Coder, DispatchRequest, DispatchResult
from assay.adapters.envpolicy import model_environment, validator_environment
from assay.adapters.process import EnvironmentFault
from assay.adapters.redact import Redactor, redactions
from assay.adapters.run_files import fault_of, fresh_folder, make_folder, seat_log_dir
from assay.adapters.validators import get_validator, load_secret_scan
from assay.adapters.validators.base import (
    ValidationContext,
    ValidationOutcome,
    could_not_run,
    only_warns,
)
from assay.core.brief import render_brief
from assay.core.changes import ChangeSet
from assay.core.report import compare_with_diff
from assay.core.text import shown
from assay.core.usage import UsageFigures
from assay.core.vocab import (
    CanonicalHalt,
    CrashPoint,
    EventKind,
    NetworkMode,
    OnFail,
    SandboxMode,
    ValidatorKind,
)
from assay.engine.close import IGNORED_SHOWN
from assay.engine.effects import FireCall, SeatCall
from assay.engine.graph.records import validator_event
from assay.engine.local.interrupt import boundary, raise_if_stopping
from assay.engine.local.metering import coder_key, metered, validator_key
from assay.engine.local.site import RunSite, SeatWork
from assay.engine.local.to_values import (
    candidate_of,
    captured_output,
    environment_failed,
    with_final_answer,
)
from assay.engine.values import Candidate, RunEvent, RunPlan


async def dispatch_seat(fx: RunSite, call: SeatCall) -> Candidate:
    plan, attempt, seat = call.plan, call.attempt, call.seat
    spec = plan.contract.coder_for_seat(seat)
    repo = await asyncio.to_thread(fx.seating.prepare, plan, seat, attempt)
    worktree = repo.path
    boundary(CrashPoint.DISPATCH_STARTED)
    load_secret_scan()  # its imports, while the coder works: every candidate is scanned
    seat_dir = seat_log_dir(fx.run_dir(plan), attempt, seat)
    # The coder writes its report (and what its program saves) in a folder of its own, new
    # for each dispatch: the seat's log folder is the engine's, never the coder's to write.
    out_dir = seats.seat_outputs(fx.seating.home, plan.run_id, seat)
    try:
        make_folder(seat_dir)
        out_dir = fresh_folder(out_dir, f"attempt-{attempt}.")
    except EnvironmentFault as exc:  # no folder for the seat: its environment error
        unmade: EnvironmentFault | None = exc
    else:
        unmade = None
    report_path = out_dir / "report.json"
    report_folder = out_dir.resolve()
    relay = await asyncio.to_thread(fx.halts.open_relay, plan, attempt, seat)
    env = fx.coder_env(plan, seat, relay.path if relay else None)
    warn_unconfined_network(fx, plan)
    meter = fx.meter(plan).dispatch(
        coder_key(plan.task_id, plan.run_id, attempt, seat, spec.kind.value)
    )
    request = DispatchRequest(
        worktree=worktree,
        prompt=call.prompt,
        dispatch_id=plan.dispatch_id,
        attempt=attempt,
        seat=seat,
        halt_state_dir=fx.state_dir(),
        report_path=report_path,
        log_dir=seat_dir,
        out_dir=out_dir,
        env=env,
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
        sandbox=fx.seating.coder_sandbox(
            plan, seat, seat_dir, out_dir, relay.folder if relay else None, env
        ),
        home=repo.home.resolve(),
        meter=meter,
    )
    coder = None
    if unmade is not None:
        result = environment_failed(unmade)
    else:
        try:
            coder = get_coder(spec.kind.value)
        except Exception as exc:  # an unknown or broken adapter: this seat's environment error
            result = DispatchResult(exit_code=None, environment_error=str(exc))
    if coder is not None and (spent := meter.stop_reason()) is not None:
        # Never started: it spent nothing, and that is known (no unknown dispatch).
        result = DispatchResult(
            exit_code=None,
            stopped=spent,
            error=f"not started: {spent}",
            usage=UsageFigures(cost_usd=0.0),
        )
    elif coder is not None:
        for setting in ignored_settings(spec, coder):
            fx.warn(f"seat {seat}: the {spec.kind.value} coder ignores `{setting}`")
        try:
            result = await asyncio.to_thread(run_coder, coder, request, seat_dir)
        except BaseException:
            # The dispatch failed in assay itself: what it reported stands, and one that
            # reported nothing is journaled as unknown, never left to sum as $0.
            meter.finish(None)
            raise
    await asyncio.to_thread(fx.halts.close_relay, attempt, seat)  # its coder has ended
    result = await asyncio.to_thread(metered, meter, result)
    if result.refused:
        refused = ", ".join(shown(target) for target in list(dict.fromkeys(result.refused))[:10])
        fx.warn(
            f"seat {seat}: the network proxy refused {refused} (not allowed for this seat: "
            "add a host under network.allow in the contract if the coder needs it)"
        )
    raise_if_stopping()  # a stop came: no capture (its collector would be stopped at once)
    change, capture = await capture_candidate(fx, plan, attempt, seat, result)
    boundary(CrashPoint.DISPATCH_ENDED)
    report = with_final_answer(
        fx.read_report(attempt, seat, report_path, report_folder, seat_dir / "report.json"),
        result.report,
    )
    commit = fx.seating.candidates.get((attempt, seat))
    fx.work[(attempt, seat)] = SeatWork(result=result, change=change, commit=commit)
    exhausted = meter.run.exhausted
    candidate = candidate_of(
        seat=seat,
        attempt=attempt,
        coder=spec.kind.value,
        result=result,
        change=change,
        commit=commit,
        report=report,
        comparison=compare_with_diff(report, change.paths)
        if report
        else compare_with_diff(None, []),
        budget=exhausted.evidence if exhausted else None,
    )
    if capture is None or not capture.ignored_count:
        return candidate
    return replace(candidate, ignored=list(capture.ignored), ignored_count=capture.ignored_count)


def run_coder(coder: Coder, request: DispatchRequest, seat_dir: Path) -> DispatchResult:
    """The coder's dispatch; a machine that failed it is its environment error (refunded,
    named), whether the coder's own process or assay's write for the seat met it."""
    try:
        return coder.dispatch(request)
    except EnvironmentFault as exc:
        return environment_failed(exc)
    except OSError as exc:  # assay's own write for the seat (its prompt, its transcript)
        fault = fault_of(exc, seat_dir)
        if fault is None:
            raise
        return environment_failed(fault)


async def capture_candidate(
    fx: RunSite, plan: RunPlan, attempt: int, seat: int, result: DispatchResult
) -> tuple[ChangeSet, Capture | None]:
    """The seat's candidate, captured inside its sandbox and imported into its candidate store:
    its change read from the base's and the candidate's trees. A candidate over its budgets,
    carrying a path no candidate may carry, or whose objects do not hold is a scope breach
    (fired, the seat left with no candidate); one that could not be captured is the seat's
    error."""
    empty = ChangeSet(base_commit=plan.base_commit, files=[], diff="")
    where = f"attempt {attempt}, seat {seat}"
    if seat not in fx.seating.seats:
        return empty, None
    capture = await asyncio.to_thread(fx.seating.capture, plan, seat)
    if capture.error is not None:
        why = f"the candidate could not be captured: {capture.error}"
        result.error = "; ".join(filter(None, [result.error, why]))
        fx.warn(f"{where}: {why}")
        return empty, capture
    breach = capture.over_budget or forbidden_paths(capture.forbidden)
    if breach is None:
        try:
            commit = await asyncio.to_thread(
                fx.seating.import_capture, plan, attempt, seat, capture
            )
        except CaptureRejected as exc:
            breach = f"the captured candidate was refused: {exc}"
        finally:
            await asyncio.to_thread(fx.seating.forget_capture, capture)
    if breach is not None:
        result.error = "; ".join(filter(None, [result.error, breach]))
        fx.warn(f"{where}: {breach}")
        await fx.fire(FireCall(plan, CanonicalHalt.SCOPE_BREACH, f"seat {seat}: {breach}"))
        return empty, capture
    store = fx.seating.store(plan, seat)
    change = await asyncio.to_thread(store.changes, plan.base_commit, commit)
    if capture.ignored_count:
        fx.warn(f"{where}: {ignored_line(capture)}")
    if capture.specials:  # FIFOs, sockets, devices: no file git can hold
        named = ", ".join(shown(p) for p in capture.specials[:IGNORED_SHOWN])
        fx.warn(f"{where}: not files, not in the candidate: {named}")
    return change, capture


def forbidden_paths(paths: Sequence[str]) -> str | None:
    """The breach a candidate's forbidden paths make (nested repositories, ``.git``)."""
    if not paths:
        return None
    named = ", ".join(shown(p) for p in paths[:5])
    more = f" and {len(paths) - 5} more" if len(paths) > 5 else ""
    return f"forbidden by rule: a nested repository or .git entry: {named}{more}"


def ignored_line(capture: Capture) -> str:
    """``ignored, not in the candidate: …``: what the coder wrote that .gitignore keeps out."""
    named = ", ".join(shown(p) for p in capture.ignored[:IGNORED_SHOWN])
    more = capture.ignored_count - min(len(capture.ignored), IGNORED_SHOWN)
    return f"ignored, not in the candidate: {named}" + (f" and {more} more" if more > 0 else "")


async def validate_seat(
    fx: RunSite,
    plan: RunPlan,
    attempt: int,
    seat: int,
    change: ChangeSet | None = None,
    commit: str | None = None,
) -> list[ValidationOutcome]:
    """Every check of the seat's candidate of ``attempt`` (``change`` and ``commit``: another
    tree, a revalidation's), the secrets it found redacted from the run's files. Each command
    validator runs in a checkout of exactly that commit (the seat's own, reset to it) with a
    fresh home."""
    work = fx.work[(attempt, seat)]
    change = change if change is not None else work.change
    commit = commit if commit is not None else work.commit
    if commit is None:
        raise ValueError(f"attempt {attempt}, seat {seat} left no candidate to validate")
    contract = plan.contract
    # The repository's own tools first on a command validator's PATH, assay's own last.
    env = validator_environment(fx.operator_env, contract.env, repo=plan.repo_root)
    log_dir = seat_log_dir(fx.run_dir(plan), attempt, seat) / "validators"
    make_folder(log_dir)  # EnvironmentFault: the attempt's environment error, refunded
    captured = captured_output(work.result)
    checks: list[tuple[str, Mapping[str, object]]] = [
        (
            "scope",
            {
                "id": "scope",
                **contract.scope.model_dump(mode="json"),
                "assay_homes": fx.seating.assay_homes(plan),
            },
        ),
        ("secrets", {"id": "secrets", "mode": contract.secrets.value}),
    ]
    checks += [(v.kind.value, v.model_dump(mode="json")) for v in contract.validators]
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
    store = fx.seating.store(plan, seat)
    for kind, settings in checks:
        checkout = None
        if kind == ValidatorKind.COMMAND:
            checkout = await asyncio.to_thread(
                fx.seating.checkout, plan, seat, commit, in_place=not fx.keep_worktrees
            )
        spending = None
        if kind == ValidatorKind.JUDGE:
            key = validator_key(plan.task_id, plan.run_id, attempt, seat, str(settings["id"]))
            spending = fx.meter(plan).dispatch(key)
        context = ValidationContext(
            worktree=checkout.path if checkout is not None else store.path,
            change=change,
            task=contract.task,
            env=coder_env if kind == "secrets" else env,
            settings=settings,
            log_dir=log_dir,
            captured_output=captured,
            sandbox=fx.seating.validator_sandbox(plan, seat, checkout) if checkout else None,
            repo=store.path,
            revision=commit,
            # The whole diff, streamed from git (the change's own text is cut for display).
            diff_lines=functools.partial(store.iter_diff, change.base_commit, commit),
            meter=spending,
        )
        validator = get_validator(kind)
        try:
            outcome = await asyncio.to_thread(validator.validate, context)
        finally:
            if checkout is not None:  # what the validator left goes with its checkout
                await asyncio.to_thread(fx.seating.done_with, checkout)
        if settings.get("on_fail") == OnFail.WARN:  # it may warn, never block nor halt
            outcome = only_warns(outcome)
            if outcome.result.error:
                fx.warn(could_not_run(outcome.result))
        spent = fx.meter(plan).held_by() if spending is not None else None
        if spent is not None and outcome.fire is None:  # a judge spent the run's budget
            outcome = replace(outcome, fire=CanonicalHalt.BUDGET_EXHAUSTED, evidence=spent)
        outcomes.append(outcome)
        # The event carries the verdict's text: a secret this seat's scan found is cut from it
        # now (the run learns it, and redacts its files, once every check is done).
        data = validator_event(attempt, seat, outcome.result)
        found = {(s.type, s.value) for o in outcomes for s in o.secrets}
        if found:
            data = Redactor(redactions(found)).data(data)
        await fx.emit(RunEvent(EventKind.VALIDATOR_FINISHED, data))
    outcomes = await asyncio.to_thread(fx.redact_secrets, plan, outcomes)
    fx.results.setdefault((attempt, seat), [o.result for o in outcomes])
    fx.seating.record_checks(attempt, seat, [o.result for o in outcomes])
    # The lander lands only a tree the checks passed (a revalidation's combined tree too): a
    # tree another seat's candidate failed with must be checked again, never taken as passed.
    if _passed(outcomes):
        fx.validated.add(await asyncio.to_thread(fx.seating.tree_of, plan, seat, commit))
    boundary(CrashPoint.VALIDATED)
    return outcomes


def _passed(outcomes: Sequence[ValidationOutcome]) -> bool:
    """No check halted, blocked or fired a halt (an advisory one that could not run only
    warned): the only verdicts under which any policy lets a tree land."""
    return all(not o.result.halts and not o.result.blocks and o.fire is None for o in outcomes)


def warn_unconfined_network(fx: RunSite, plan: RunPlan) -> None:
    """``network: host`` (or no sandbox at all) gives the seat this machine's network, loopback
    included: said once per run, when its first seat starts."""
    contract = plan.contract
    if contract.sandbox is SandboxMode.NONE:
        fx.warn(
            "sandbox: none: the seats' processes run unconfined, with this machine's network "
            "and files (the ledger, the dashboard, Temporal and every local service reachable)"
        )
    elif NetworkMode.HOST in (contract.network.mode, contract.network.validators):
        fx.warn(
            "network: host: the seats' processes share this machine's network, loopback "
            "included (the ledger, the dashboard, Temporal and every local service reachable)"
        )
