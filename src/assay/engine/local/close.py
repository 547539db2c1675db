"""How the local executor opens a run and records its close.

Open: the task claims an attempt in the ledger and the run folder's lock is taken (before
the run's row: a starting run never looks dead). Record: attest the halts, build the close
(:func:`assay.engine.close.close_run`, pure), write the payload, then the ledger's close in
one transaction; a run that did not land keeps its candidates' branches for a look, and its
seats go. A run stopped by a signal is closed from its journal (:mod:`assay.engine.recovery.close`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import signal
import threading
from datetime import datetime
from pathlib import Path

from assay.adapters import git
from assay.adapters.home import make_home
from assay.adapters.origin import OriginError, fetch_branch
from assay.adapters.run_files import cause_of
from assay.adapters.stop_request import mark_watched
from assay.adapters.store import halt_files
from assay.core.contract import Contract
from assay.core.payload import HaltNotice
from assay.core.vocab import CoderKind, CrashPoint, RunStatus, ValidatorKind
from assay.engine.close import CloseFacts, close_run
from assay.engine.crashpoints import crash_point
from assay.engine.effects import OpenRequest, RunHandle, RunRecorded
from assay.engine.local.attestation import attest_at_close
from assay.engine.local.interrupt import RunInterrupted, UserStop
from assay.engine.local.journal import read_journal
from assay.engine.local.run_lock import hold_run_lock
from assay.engine.local.site import RunSite
from assay.engine.recovery.close import (
    KEEP_MARKER,
    KEEPS_CANDIDATES,
    close_document,
    close_unfinished,
    remove_unrecorded_run_folder,
)
from assay.engine.recovery.refunds import closed_quota_streak, refund_streak
from assay.engine.run_result import RunResult
from assay.engine.values import RunPlan


def run_base(fx: RunSite) -> tuple[str, str | None]:
    """The commit a run starts from and the branch it lands on: with an origin, that origin's
    tip of the branch the task targets (fetched now: never this clone's own branch, which may
    be behind or hold what no one validated), else this checkout's HEAD and branch."""
    if fx.origin is None:
        return git.head_commit(fx.repo), git.current_branch(fx.repo)
    branch = fx.task.branch or git.current_branch(fx.repo)
    if branch is None:
        raise OriginError(
            f"task {fx.task.id} names no branch and {fx.repo} has a detached HEAD: "
            f"there is no branch of {fx.origin} to start from"
        )
    return fetch_branch(fx.repo, fx.origin, branch), branch


def open_run(fx: RunSite, call: OpenRequest) -> tuple[RunPlan, datetime]:
    """Claim the task's attempt and create the run; the plan and when the run started."""
    task, repo = fx.task, fx.repo
    if call.task_id != task.id:
        raise ValueError(f"this run is of task {task.id}, not {call.task_id}")
    started = fx.started_at or fx.clock()
    make_home(repo, fx.home)  # the run's folders go there, hidden from `git status`
    base_commit, base_branch = run_base(fx)
    plan = RunPlan(
        task_id=task.id,
        run_id=call.run_id,
        dispatch_id=call.run_id,
        contract=fx.contract,
        repo_root=repo,
        base_commit=base_commit,
        base_branch=base_branch,
        origin=fx.origin,
    )
    warm_up_model_client(fx.contract)
    run_dir = fx.run_dir(plan)
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = hold_run_lock(run_dir)  # before the row: a starting run never looks dead
    try:
        task.start(started, run_id=plan.run_id)
        fx.ledger.start_run(task, plan.run_id, dispatch_id=plan.dispatch_id, started_at=started)
    except BaseException:  # never recorded (a locked ledger, say): leave no folder behind
        remove_unrecorded_run_folder(run_dir)
        os.close(lock)
        raise
    fx.run_lock, fx.plan, fx.started_at = lock, plan, started
    mark_watched(run_dir)  # recorded: a stop request sent here reaches this run (a local one)
    fx.keep_worktrees = call.keep_worktrees
    if call.keep_worktrees:  # asked for: recovery's sweep leaves this run's seats alone
        (run_dir / KEEP_MARKER).touch()
    return plan, started


def warm_up_model_client(contract: Contract) -> None:
    """Import the HTTP client (~0.1 s) in the background while coders work, when a model will
    be called: an llm coder, a judge validator or blind judges."""
    judges = contract.judges > 0 and contract.judge is not None
    seats = range(1, contract.seats + 1)
    coders = any(contract.coder_for_seat(s).kind is CoderKind.LLM for s in seats)
    validators = any(v.kind is ValidatorKind.JUDGE for v in contract.validators)
    if judges or coders or validators:
        threading.Thread(target=importlib.import_module, args=("httpx",), daemon=True).start()


def record_run(fx: RunSite, handle: RunHandle, result: RunResult) -> RunRecorded:
    """Close a run the graph finished (or broke: then its counts come from its journal)."""
    plan, ledger = handle.plan, fx.ledger
    run_dir = fx.run_dir(plan)
    dispatches = None
    if result.journaled:
        if result.trace:
            with contextlib.suppress(OSError):  # a full disk must not hide the error itself
                (run_dir / "internal-error.txt").write_text(result.trace)
        events = ledger.events(run_id=plan.run_id)
        done = read_journal(events, dispatch_id=plan.dispatch_id, fault=result.reason)
        result = dataclasses.replace(result, attempts=done.attempts)
        dispatches = done.dispatches
    if fx.keep_worktrees or result.status in KEEPS_CANDIDATES:
        # A candidate that passed the scope and secret checks is left as a branch for a
        # look (never one blocked for a secret).
        fx.keep_for_a_look(plan)
    unattested: list[HaltNotice] = []  # an attestation failure is a warning; the run closes
    if not result.halted:
        unattested = attest_at_close(plan.dispatch_id, fx.state_dir())
    for notice in unattested:
        fx.warn(notice.detail)
    task = fx.task
    settled_at = fx.clock()
    refunds = refund_streak(ledger, task.id)
    facts = CloseFacts(
        task=task,
        run_id=plan.run_id,
        dispatch_id=plan.dispatch_id,
        contract=plan.contract,
        result=result,
        started_at=handle.started_at,
        settled_at=settled_at,
        finished_at=fx.clock(),
        refunds=refunds,
        quota_streak=closed_quota_streak(ledger, task.id),
        unattested=unattested,
        dispatches=dispatches,
        usage=ledger.usage(run_id=plan.run_id),
    )
    closing = close_run(facts)
    # The task the executor was handed comes back settled (its caller reads it, as the CLI does).
    for name in type(fx.task).model_fields:
        setattr(fx.task, name, getattr(closing.task, name))
    payload = fx.redacted_payload(closing.payload)
    payload_file = run_dir / "payload.json"
    payload_path: Path | None = payload_file
    try:
        halt_files.write_json_atomic(payload_file, payload.to_json())
    except OSError as exc:  # the ledger is the truth: the run still closes there, and says so
        fx.warn(f"the payload was not written to {payload_file}: {cause_of(exc)}")
        payload_path = None
    crash_point(CrashPoint.PAYLOAD_WRITTEN)
    document = close_document(
        payload.to_json(),
        diff=_chosen_diff(fx, result),
        state_dir=fx.state_dir(),
        dispatch_id=plan.dispatch_id,
        redactor=fx.redaction.redactor,
    )
    row = closing.row.model_copy(
        update={"payload_path": str(payload_path) if payload_path else None, "document": document}
    )
    ledger.close_run(row)  # the run's events are in the ledger already (journaled as they ran)
    crash_point(CrashPoint.LEDGER_CLOSED)
    if not fx.keep_worktrees:
        fx.cleanup(plan, keep_branches=_branches_kept(fx, result, payload.status))
    return RunRecorded(
        run_id=plan.run_id,
        status=result.status,
        task=closing.task,
        settlement=closing.settlement,
        payload=payload,
        payload_path=str(payload_path) if payload_path else None,
        warnings=list(fx.warnings),
    )


def _chosen_diff(fx: RunSite, result: RunResult) -> str | None:
    """The diff of the candidate the run chose (read on this worker when it was dispatched)."""
    winner = result.winner
    work = fx.work.get((winner.attempt, winner.seat)) if winner is not None else None
    return work.change.diff if work is not None else None


def _branches_kept(fx: RunSite, result: RunResult, status: RunStatus) -> set[int]:
    """The seats whose branch stays once the seats are gone: every candidate a run that did
    not land brought into the repository (its one commit, for a look); of a landed run, only
    the branch ``land: branch`` leaves (a merged run's is on the base branch now)."""
    if status in KEEPS_CANDIDATES:
        return set(fx.seating.fetched)
    if result.land and result.land.branch and result.winner and status is not RunStatus.MERGED:
        return {result.winner.seat}
    return set()


def close_interrupted(fx: RunSite, stop: RunInterrupted, stopped: UserStop | None = None) -> None:
    """Close the run a stop request ended, from what its journal says (counts exact);
    ``stopped``: its own user stopped it, and the task it leaves runnable is held."""
    plan = fx.plan
    if plan is None:  # stopped before it opened: nothing to close
        return
    close_unfinished(
        repo=fx.repo,
        home=fx.home,
        ledger=fx.ledger,
        record=fx.ledger.get_run(plan.run_id),
        contract=plan.contract,
        reason=_interrupted_reason(stop),
        clock=fx.clock,
        warn=fx.warn,
        stopped=stopped,
    )
    stop.payload_path = str(fx.run_dir(plan) / "payload.json")


def _interrupted_reason(stop: RunInterrupted) -> str:
    """Why the run closed: assay was stopped by a signal, or an operator stopped this run."""
    if stop.ask is not None:
        return f"interrupted: {stop}: {stop.ask.reason}"
    return f"interrupted: assay was stopped by {signal.Signals(stop.signum).name}"
