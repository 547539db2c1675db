"""One run, start to close, on this machine: the local executor's lifecycle.

start (the task claims an attempt in the ledger) → the graph → close: attest the halts,
settle the task, write the payload, and record it all in the ledger in one transaction.
A run lost to a provider's quota is refunded by settle and the task then waits (the
provider's reset time, or a backoff on the streak of such runs) before it is runnable again.
A run that ended on a fired block halt is not attested: the halt stays FIRED, sticky, until an
operator re-arms it with evidence of the remedy (``assay halt rearm``), which closure would
otherwise forbid.
A run holds an exclusive lock on its run folder while it lives, so a later process can tell
an interrupted run (lock free, run still open) from one still running.
Every event is journaled in the ledger as it happens; a run stopped by a signal
(:class:`RunInterrupted`) or killed is closed from that journal (:mod:`assay.engine.recover`),
and a graph that raised is closed as an internal error with the counts the journal holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import importlib
import os
import secrets
import signal
import threading
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from assay.adapters import git
from assay.adapters.process import EnvironmentFault
from assay.adapters.process_groups import GROUPS_FILE, recording_groups
from assay.adapters.run_files import cause_of
from assay.adapters.store import halt_files
from assay.adapters.store.halt_journal import journaled_firings
from assay.adapters.store.records import DispatchRecord, RunClose
from assay.adapters.store.sql import Ledger
from assay.core.contract import Contract
from assay.core.payload import (
    CandidateSummary,
    HaltNotice,
    LandSummary,
    Payload,
    build_payload,
)
from assay.core.settle import Settlement, settle
from assay.core.tasks import Task
from assay.core.vocab import CoderKind, CrashPoint, HaltType, RunStatus, ValidatorKind
from assay.engine.accounting import seat_error
from assay.engine.attestation import attest_at_close
from assay.engine.crashpoints import crash_point
from assay.engine.effects import RunPlan
from assay.engine.graph import run_graph
from assay.engine.interrupt import RunInterrupted
from assay.engine.journal import journaled, read_journal
from assay.engine.local import EventSink, LocalEffects
from assay.engine.recover import (
    KEEP_MARKER,
    KEEPS_CANDIDATES,
    close_unfinished,
    remove_unrecorded_run_folder,
)
from assay.engine.recover import recover_interrupted as recover_runs
from assay.engine.refunds import refund_streak, wait_after_refund
from assay.engine.result import RunResult

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_run_id(now: datetime) -> str:
    return f"r{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class RunReport:
    """What a finished run did, for the CLI."""

    run_id: str
    task: Task
    settlement: Settlement
    payload: Payload
    payload_path: Path | None  # None when it could not be written (a warning says why)
    warnings: list[str]


def run_task(
    *,
    repo: Path,
    home: Path,
    ledger: Ledger,
    task: Task,
    contract: Contract,
    env: Mapping[str, str] | None = None,
    sink: EventSink | None = None,
    keep_worktrees: bool = False,
    clock: Clock = utc_now,
) -> RunReport:
    """Run ``task`` once under ``contract`` and close it; the task comes back settled."""
    started = clock()
    run_id = new_run_id(started)
    git.ensure_excluded(repo, ".assay/")
    base_commit = git.head_commit(repo)
    plan = RunPlan(
        task_id=task.id,
        run_id=run_id,
        dispatch_id=run_id,
        contract=contract,
        repo_root=repo,
        base_commit=base_commit,
        base_branch=git.current_branch(repo),
    )
    warm_up_model_client(contract)
    # Every event reaches the ledger as it happens, so a run that dies keeps exact counts.
    journal = journaled(ledger, task_id=task.id, run_id=run_id, clock=clock, then=sink)
    operator_env = env if env is not None else os.environ
    fx = LocalEffects(
        home=home,
        operator_env=operator_env,
        sink=journal,
        journaled_firings=lambda: journaled_firings(ledger.events(run_id=run_id)),
    )
    run_dir = fx.run_dir(plan)
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = _hold_run_lock(run_dir)  # before the row: a starting run never looks dead
    try:
        task.start(started, run_id=run_id)
        ledger.start_run(task, run_id, dispatch_id=run_id, started_at=started)
    except BaseException:  # never recorded (a locked ledger, say): leave no folder behind
        remove_unrecorded_run_folder(run_dir)
        os.close(lock)
        raise
    if keep_worktrees:  # asked for: recovery's sweep leaves this run's seats alone
        (run_dir / KEEP_MARKER).touch()
    try:
        crash_point(CrashPoint.TASK_STARTED)
        dispatches: list[DispatchRecord] | None = None
        try:
            with recording_groups(run_dir / GROUPS_FILE):  # what recovery stops after a crash
                result = asyncio.run(run_graph(plan, fx))
        except RunInterrupted as stop:
            close_unfinished(
                repo=repo,
                home=home,
                ledger=ledger,
                record=ledger.get_run(run_id),
                contract=contract,
                reason=f"interrupted: assay was stopped by {signal.Signals(stop.signum).name}",
                clock=clock,
            )
            stop.payload_path = str(run_dir / "payload.json")
            raise
        except EnvironmentFault as fault:  # the machine refused a write of the run's own
            reason = f"environment error: {fault}"
            done = read_journal(ledger.events(run_id=run_id), dispatch_id=run_id, fault=reason)
            result = RunResult(RunStatus.FAILED, HaltType.ENVIRONMENT_ERROR, reason)
            result.machine_fault = True  # refunded, like a seat lost to its environment
            result.attempts, dispatches = done.attempts, done.dispatches
        except Exception as exc:  # any bug becomes an honest internal_error payload
            with contextlib.suppress(OSError):  # a full disk must not hide the error itself
                (run_dir / "internal-error.txt").write_text(traceback.format_exc())
            reason = f"internal error: {exc!r}"
            done = read_journal(ledger.events(run_id=run_id), dispatch_id=run_id, fault=reason)
            result = RunResult(RunStatus.FAILED, HaltType.INTERNAL_ERROR, reason)
            result.attempts, dispatches = done.attempts, done.dispatches
        if keep_worktrees or result.status in KEEPS_CANDIDATES:
            # A candidate that passed the scope and secret checks is left as a branch for a
            # look (never one blocked for a secret).
            fx.keep_for_a_look(plan)
        report = close_run(
            plan=plan,
            fx=fx,
            ledger=ledger,
            task=task,
            result=result,
            started=started,
            clock=clock,
            dispatches=dispatches,
        )
        if not keep_worktrees:
            fx.cleanup(plan, keep_branches=_branches_kept(result, report.payload.status, fx))
        return report
    finally:
        fx.close()  # the halt relay: no coder runs any more
        os.close(lock)


def _branches_kept(result: RunResult, status: RunStatus, fx: LocalEffects) -> set[int]:
    """The seats whose branch stays once the seats are gone: every candidate a run that did
    not land brought into the repository (its one commit, for a look); of a landed run, only
    the branch ``land: branch`` leaves (a merged run's is on the base branch now)."""
    if status in KEEPS_CANDIDATES:
        return set(fx.seating.fetched)
    if result.land and result.land.branch and result.winner and status is not RunStatus.MERGED:
        return {result.winner.seat}
    return set()


def warm_up_model_client(contract: Contract) -> None:
    """Import the HTTP client (~0.1 s) in the background while coders work, when a model will
    be called: an llm coder, a judge validator or blind judges."""
    judges = contract.judges > 0 and contract.judge is not None
    seats = range(1, contract.seats + 1)
    coders = any(contract.coder_for_seat(s).kind is CoderKind.LLM for s in seats)
    validators = any(v.kind is ValidatorKind.JUDGE for v in contract.validators)
    if judges or coders or validators:
        threading.Thread(target=importlib.import_module, args=("httpx",), daemon=True).start()


def close_run(
    *,
    plan: RunPlan,
    fx: LocalEffects,
    ledger: Ledger,
    task: Task,
    result: RunResult,
    started: datetime,
    clock: Clock,
    dispatches: list[DispatchRecord] | None = None,
) -> RunReport:
    """Close a run the graph finished (or broke: then ``dispatches`` come from its journal)."""
    contract = plan.contract
    unattested: list[HaltNotice] = []  # an attestation failure is a warning; the run closes
    if not result.halted:
        unattested = attest_at_close(plan.dispatch_id, fx.state_dir())
    for notice in unattested:
        fx.warn(notice.detail)
    now = clock()
    refunds = refund_streak(ledger, task.id)
    budgets = contract.budgets
    settlement = settle(
        task,
        result.verdict,
        result.reason,
        budgets.max_attempts,
        now,
        refunds=refunds,
        max_refunds=budgets.max_refunds,
    )
    wait_after_refund(ledger, task, settlement, refunds, result.quota_reset_at, now)
    winner = result.winner
    payload = build_payload(
        task_id=task.id,
        run_id=plan.run_id,
        dispatch_id=plan.dispatch_id,
        status=result.status,
        halt_type=result.halt_type,
        reason=result.reason,
        task_status=settlement.new_status,
        attempt_spent=settlement.attempt_spent,
        task_spec=contract.task,
        attempts=result.attempts,
        started_at=started,
        finished_at=max(clock(), started),
        validator_results=result.validator_results,
        policy_decision=result.policy_decision,
        candidates=[
            CandidateSummary(
                seat=s.seat,
                label=result.labels.get(s.seat),
                coder=s.coder,
                files_changed=s.change.paths,
                type_changes=s.change.type_changes(),
                viable=s.viable,
                lost_to_quota=s.lost_to_quota,
                lost_to_provider_fault=s.lost_to_provider_fault,
                fault=seat_error(s) if s.lost_to_machine else None,
                stop_reason=s.result.stop_reason,
            )
            for s in result.latest_seats
        ],
        tally=result.tally,
        coder_report=winner.report if winner else None,
        report_comparison=winner.comparison if winner else None,
        fired_halts=[*result.fired, *unattested],
        usage=result.usage(),
        land=LandSummary(mode=contract.land, branch=result.land.branch, pr_url=result.land.pr_url)
        if result.land
        else None,
        sandbox=contract.sandbox,  # a bwrap contract never runs unconfined: the CLI refuses
    )
    payload = fx.redacted_payload(payload)
    payload_file = fx.run_dir(plan) / "payload.json"
    payload_path: Path | None = payload_file
    try:
        halt_files.write_json_atomic(payload_file, payload.to_json())
    except OSError as exc:  # the ledger is the truth: the run still closes there, and says so
        fx.warn(f"the payload was not written to {payload_file}: {cause_of(exc)}")
        payload_path = None
    crash_point(CrashPoint.PAYLOAD_WRITTEN)
    judges = sum(1 for v in contract.validators if v.kind is ValidatorKind.JUDGE)
    ledger.close_run(
        RunClose(
            run_id=plan.run_id,
            status=result.status,
            task=task,
            settlement=settlement,
            reason=result.reason,
            attempts=result.attempts,
            dispatches=dispatches
            if dispatches is not None
            else [
                DispatchRecord(
                    dispatch_id=f"{plan.dispatch_id}.a{d.attempt}.s{d.seat}",
                    attempt=d.attempt,
                    seat=d.seat,
                    coder=d.coder,
                    label=result.labels.get(d.seat),
                    viable=d.viable,
                    lost_to_quota=d.lost_to_quota,
                    stop_reason=d.result.stop_reason,
                    files_changed=len(d.change.paths),
                    tokens_used=d.result.tokens_used,
                    cost_usd=d.result.cost_usd,
                    wall_time_ms=d.result.wall_time_ms,
                )
                for d in result.dispatches
            ],
            judge_calls=judges * result.validations + result.judge_calls,
            land_attempts=1 if result.land else 0,
            payload_path=str(payload_path) if payload_path else None,
            finished_at=payload.finished_at,
        )
    )  # the run's events are in the ledger already (journaled as they happened)
    crash_point(CrashPoint.LEDGER_CLOSED)
    return RunReport(
        run_id=plan.run_id,
        task=task,
        settlement=settlement,
        payload=payload,
        payload_path=payload_path,
        warnings=list(fx.warnings),
    )


def _hold_run_lock(run_dir: Path) -> int:
    fd = os.open(run_dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, str(os.getpid()).encode())
    return fd


def run_is_alive(run_dir: Path) -> bool:
    """True while some process holds the run's lock (it is still running)."""
    lock = run_dir / "lock"
    if not lock.exists():
        return False
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def recover_interrupted(
    *,
    repo: Path,
    home: Path,
    ledger: Ledger,
    contract_for: Callable[[str], Contract],
    clock: Clock = utc_now,
) -> list[str]:
    """Close every open run whose process died (see :mod:`assay.engine.recover`): once, as
    landed when its commit is on the base branch, else as interrupted and refunded."""
    return recover_runs(
        repo=repo,
        home=home,
        ledger=ledger,
        contract_for=contract_for,
        is_alive=run_is_alive,
        clock=clock,
    )
