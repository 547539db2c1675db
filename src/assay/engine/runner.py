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
"""

from __future__ import annotations

import asyncio
import fcntl
import importlib
import os
import secrets
import threading
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from assay.adapters import git
from assay.adapters.store import halt_files
from assay.adapters.store.records import DispatchRecord, EventIn, RunClose
from assay.adapters.store.sql import Ledger
from assay.core.attempts import AttemptRecord
from assay.core.backoff import QUOTA_ROWS, quota_streak, quota_wait
from assay.core.contract import Contract
from assay.core.payload import (
    CandidateSummary,
    HaltNotice,
    LandSummary,
    Payload,
    build_payload,
)
from assay.core.settle import Settlement, Verdict, settle
from assay.core.tasks import Task
from assay.core.vocab import AttemptOutcome, CoderKind, HaltType, RunStatus, ValidatorKind
from assay.engine.attestation import attest_at_close
from assay.engine.effects import RunPlan
from assay.engine.graph import run_graph
from assay.engine.local import EventSink, LocalEffects
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
    payload_path: Path
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
    fx = LocalEffects(home=home, operator_env=env if env is not None else os.environ, sink=sink)
    run_dir = fx.run_dir(plan)
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = _hold_run_lock(run_dir)
    try:
        task.start(started, run_id=run_id)
        ledger.start_run(task, run_id, dispatch_id=run_id, started_at=started)
        try:
            result = asyncio.run(run_graph(plan, fx))
        except Exception as exc:  # any bug becomes an honest internal_error payload
            (run_dir / "internal-error.txt").write_text(traceback.format_exc())
            result = RunResult(
                RunStatus.FAILED, HaltType.INTERNAL_ERROR, f"internal error: {exc!r}"
            )
        report = close_run(
            plan=plan, fx=fx, ledger=ledger, task=task, result=result, started=started, clock=clock
        )
        failed = report.payload.status in (RunStatus.FAILED, RunStatus.BLOCKED, RunStatus.STALLED)
        if not keep_worktrees and not failed:
            keep = (
                {result.winner.seat}
                if result.land and result.land.branch and result.winner
                else set()
            )
            fx.cleanup(plan, keep_branches=keep)
        return report
    finally:
        os.close(lock)


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
) -> RunReport:
    contract = plan.contract
    now = clock()
    unattested: list[HaltNotice] = []  # an attestation failure is a warning; the run closes
    if not result.halted:
        unattested = attest_at_close(plan.dispatch_id, fx.state_dir())
    for notice in unattested:
        fx.warn(notice.detail)
    settlement = settle(task, result.verdict, result.reason, contract.budgets.max_attempts, now)
    if settlement.row in QUOTA_ROWS:
        # Set before the close is written, so the refund and its wait land in one transaction.
        task.wait_until(quota_wait_for(ledger, task, result.quota_reset_at, now), now)
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
                viable=s.viable,
                lost_to_quota=s.lost_to_quota,
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
    )
    payload_path = fx.run_dir(plan) / "payload.json"
    halt_files.write_json_atomic(payload_path, payload.to_json())
    judges = sum(1 for v in contract.validators if v.kind is ValidatorKind.JUDGE)
    ledger.close_run(
        RunClose(
            run_id=plan.run_id,
            status=result.status,
            task=task,
            settlement=settlement,
            reason=result.reason,
            attempts=result.attempts,
            dispatches=[
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
            payload_path=str(payload_path),
            finished_at=payload.finished_at,
            events=[EventIn(kind=e.kind, data=e.data) for e in fx.events],
        )
    )
    return RunReport(
        run_id=plan.run_id,
        task=task,
        settlement=settlement,
        payload=payload,
        payload_path=payload_path,
        warnings=list(fx.warnings),
    )


def quota_wait_for(
    ledger: Ledger, task: Task, reset_at: datetime | None, now: datetime
) -> datetime:
    """When a task just lost a run to quota may run again: ``quota_wait`` on the streak.

    The streak is read from the task's closed runs in the ledger (this run, still open, is
    the ``+ 1``), so there is no separate counter to drift from them.
    """
    closed = [r.settle_row for r in ledger.runs(task.id) if not r.open]
    return quota_wait(reset_at, now, quota_streak(closed) + 1)


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
    *, home: Path, ledger: Ledger, contract_for: Callable[[str], Contract], clock: Clock = utc_now
) -> list[str]:
    """Close every open run whose process died: once, as an environment error, refunded.

    The interrupted attempt is recorded (outcome ``error``) and the task becomes runnable
    again; a second recovery finds the run closed and does nothing, so nothing counts twice.
    """
    recovered: list[str] = []
    for record in ledger.open_runs():
        run_dir = home / "runs" / record.id
        if run_is_alive(run_dir):
            continue
        task = ledger.get_task(record.task_id)
        contract = contract_for(task.id)
        reason = "interrupted: the process running it died before the run closed"
        attempts = [
            AttemptRecord(
                attempt=1, outcome=AttemptOutcome.ERROR, coder_dispatches=0, failures=[reason]
            )
        ]
        verdict = Verdict(status=RunStatus.FAILED, parked=True)
        now = clock()
        settlement = settle(task, verdict, reason, contract.budgets.max_attempts, now)
        payload = build_payload(
            task_id=task.id,
            run_id=record.id,
            dispatch_id=record.dispatch_id or record.id,
            status=RunStatus.FAILED,
            halt_type=HaltType.ENVIRONMENT_ERROR,
            reason=reason,
            task_status=settlement.new_status,
            attempt_spent=settlement.attempt_spent,
            task_spec=contract.task,
            attempts=attempts,
            started_at=record.started_at,
            finished_at=max(now, record.started_at),
        )
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / "payload.json"
        halt_files.write_json_atomic(path, payload.to_json())
        ledger.close_run(
            RunClose(
                run_id=record.id,
                status=RunStatus.FAILED,
                task=task,
                settlement=settlement,
                reason=reason,
                attempts=attempts,
                payload_path=str(path),
                finished_at=payload.finished_at,
                events=[EventIn(kind="run.interrupted", data={"reason": reason})],
            )
        )
        recovered.append(record.id)
    return recovered
