"""One run, start to close, on this machine: the local executor's lifecycle.

The graph opens the run (the task claims an attempt in the ledger), runs its attempts and
records its close: attest the halts, settle the task, write the payload, and record it all in
the ledger in one transaction (:mod:`assay.engine.local.close`, building the close with the
one pure :func:`assay.engine.close.close_run`).
A run lost to a provider's quota is refunded by settle and the task then waits (the
provider's reset time, or a backoff on the streak of such runs) before it is runnable again.
A run that ended on a fired block halt is not attested: the halt stays FIRED, sticky, until an
operator re-arms it with evidence of the remedy (``assay halt rearm``), which closure would
otherwise forbid.
A run holds an exclusive lock on its run folder while it lives, so a later process can tell
an interrupted run (lock free, run still open) from one still running.
Every event is journaled in the ledger as it happens; a run stopped by a signal
(:class:`RunInterrupted`) or killed is closed from that journal
(:mod:`assay.engine.recovery.close`),
and a graph that raised is closed as an internal error with the counts the journal holds.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from assay.adapters.actor import Actor
from assay.adapters.stop_request import watching
from assay.adapters.store.sql import Ledger
from assay.core.contract import Contract
from assay.core.payload import Payload
from assay.core.settle import Settlement
from assay.core.tasks import Task
from assay.engine.effects import OpenRequest
from assay.engine.graph.run import run_graph
from assay.engine.local.executor import EventSink, LocalEffects
from assay.engine.local.interrupt import RunInterrupted, run_awake
from assay.engine.local.run_lock import run_is_alive
from assay.engine.recovery.close import recover_interrupted as recover_runs

__all__ = ["RunReport", "new_run_id", "recover_interrupted", "run_is_alive", "run_task"]

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
    max_attempts: int | None = None  # the contract's budget the task's attempts count against


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
    stopped_by: Actor | None = None,
    origin: str | None = None,
) -> RunReport:
    """Run ``task`` once under ``contract`` and close it; the task comes back settled.

    ``stopped_by``: the person running it (``assay run``). A stop request that ends the run
    is theirs, and the task is held (manual) instead of runnable again; without it (``assay
    serve``) a stop is the queue's, and its tasks run again. ``origin``: the remote the run
    starts from and lands on (None: ``repo`` itself)."""
    started = clock()
    fx = LocalEffects(
        repo=repo,
        home=home,
        ledger=ledger,
        task=task,
        contract=contract,
        operator_env=env if env is not None else os.environ,
        sink=sink,
        clock=clock,
        started_at=started,
        origin=origin,
    )
    request = OpenRequest(
        task_id=task.id, run_id=new_run_id(started), keep_worktrees=keep_worktrees
    )
    try:
        with watching(home / "runs" / request.run_id):  # an operator's stop request, if any
            recorded = run_awake(run_graph(request, fx))
    except RunInterrupted as stop:
        by = stopped_by
        fx.interrupted(stop, stop.user_stop(by.by if by else None, by.via.value if by else ""))
        raise
    finally:
        fx.close()  # the halt relay (no coder runs any more) and the run folder's lock
    return RunReport(
        run_id=recorded.run_id,
        task=recorded.task,
        settlement=recorded.settlement,
        payload=recorded.payload,
        payload_path=Path(recorded.payload_path) if recorded.payload_path else None,
        warnings=recorded.warnings,
        max_attempts=contract.budgets.max_attempts,
    )


def recover_interrupted(
    *,
    repo: Path,
    home: Path,
    ledger: Ledger,
    contract_for: Callable[[str], Contract],
    clock: Clock = utc_now,
    warn: Callable[[str], None] | None = None,
) -> list[str]:
    """Close every open run whose process died (see :mod:`assay.engine.recovery.close`): once, as
    landed when its commit is on the base branch, else as interrupted and refunded. A seat or
    branch that cannot be removed is said to ``warn`` and stays; recovery goes on."""
    return recover_runs(
        repo=repo,
        home=home,
        ledger=ledger,
        contract_for=contract_for,
        is_alive=run_is_alive,
        clock=clock,
        warn=warn,
    )
