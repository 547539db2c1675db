"""An operator stops a running task, or re-runs a failed one: one path for the CLI (``assay
task stop|retry``) and the dashboard's buttons.

**Stop.** A running task's run settles it, so no ledger move can hold it; its run is asked to
stop instead, and its close holds the task (manual) with the reason, recorded as a
``task.saved`` event with who asked (``action`` ``hold`` or ``cancel``). On Temporal the
task's workflow is signalled (the caller passes how, :data:`TemporalStop`); on this machine the
request is left in the run's folder and its coders are stopped
(:mod:`assay.adapters.stop_request`). Either way the request itself is journaled at once
(``task.stop_requested``, with who, from where and why), so it is on record even when the run
ends by itself before it notices.

**Retry.** A failed task is runnable again, but may wait (a quota reset, a backoff after a
refunded run): a retry clears the wait so it runs now, attempts kept — the lifecycle's
``skip_wait``, recorded as a ``task.saved`` event with ``action: retry``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from assay.adapters.actor import Actor
from assay.adapters.stop_request import StopAsk, send_ask, watched
from assay.adapters.store.errors import RunNotFound
from assay.core.tasks import Task
from assay.core.vocab import EventKind, OperatorMove, TaskStatus
from assay.engine.local.run_lock import run_is_alive
from assay.engine.operations.moves import CANCEL_REASON, HOLD_REASON, MoveRefused, move_task

if TYPE_CHECKING:
    from assay.adapters.store.sql import Ledger

__all__ = [
    "RetryRefused",
    "StopRefused",
    "Stopping",
    "TemporalStop",
    "retry_task",
    "stop_task",
]

TemporalStop = Callable[[Task, StopAsk], bool]
"""Signal the task's workflow to stop with this request; False when no workflow of the task
is running (the run is then looked for on this machine)."""


class StopRefused(Exception):
    """The task cannot be stopped now (it is not running, or its run is not reachable from
    here); ``str(exc)`` says why and what to do. ``running``: it is running (elsewhere)."""

    def __init__(self, message: str, *, running: bool = False) -> None:
        super().__init__(message)
        self.running = running


class RetryRefused(Exception):
    """The task is not failed, so there is nothing to re-run; ``str(exc)`` says what to do."""


@dataclass(frozen=True)
class Stopping:
    """A stop sent: to the task's workflow (``temporal``) or to its run here (``run_id``)."""

    task: Task
    ask: StopAsk
    run_id: str | None
    temporal: bool


def stop_task(
    ledger: Ledger,
    home: Path | None,
    task_id: str,
    *,
    cancel: bool,
    actor: Actor,
    now: datetime,
    reason: str | None = None,
    temporal: TemporalStop | None = None,
) -> Stopping:
    """Ask the task's running run to stop; its close holds the task (``cancel``: as
    cancelled). ``home``: this machine's ``.assay`` (None: no run of this machine is
    reachable). Raises the store's ``TaskNotFound`` / ``UnreadableTask``, or ``StopRefused``."""
    task = ledger.get_task(task_id)
    move = OperatorMove.CANCEL if cancel else OperatorMove.HOLD
    given = (reason or "").strip()
    said = given or (CANCEL_REASON if cancel else HOLD_REASON)
    ask = StopAsk(action=move.value, by=actor.by, via=actor.via.value, reason=said)
    if task.status is not TaskStatus.RUNNING:
        raise StopRefused(not_running(task, move))
    run_id = task.run_ids[-1] if task.run_ids else None
    if temporal is not None and temporal(task, ask):
        _journal(ledger, task, ask, run_id, now, on="temporal")
        return Stopping(task=task, ask=ask, run_id=run_id, temporal=True)
    run_dir = _live_run_dir(ledger, home, task, run_id)
    _journal(ledger, task, ask, run_id, now, on="local")
    send_ask(run_dir, ask)
    return Stopping(task=task, ask=ask, run_id=run_id, temporal=False)


def not_running(task: Task, move: OperatorMove) -> str:
    """Why a stop is refused for a task that is not running, and the move that fits it."""
    said = f"task {task.id!r} is {task.status}, not running: there is no run to stop"
    if task.status in (TaskStatus.QUEUED, TaskStatus.FAILED):
        return f"{said} (`assay task {move.value} {task.id}` parks it before it runs)"
    if task.status is TaskStatus.HELD:
        return f"{said} (it is held already: `assay task release {task.id}` lets it run again)"
    return said


def _live_run_dir(ledger: Ledger, home: Path | None, task: Task, run_id: str | None) -> Path:
    """The folder of the task's open run, whose process lives on this machine; else refused."""
    elsewhere = (
        f"task {task.id!r} is running, but not in a process on this machine: on Temporal, set "
        f"ASSAY_TEMPORAL=HOST:PORT (`assay serve --temporal` does for its dashboard); "
        f"elsewhere, stop it there"
    )
    if run_id is None or home is None:
        raise StopRefused(elsewhere, running=True)
    try:
        record = ledger.get_run(run_id)
    except RunNotFound:
        raise StopRefused(elsewhere, running=True) from None
    run_dir = home / "runs" / run_id
    if not record.open or not run_dir.is_dir() or not watched(run_dir):
        raise StopRefused(elsewhere, running=True)  # (a worker's run: its workflow stops it)
    if not run_is_alive(run_dir):
        raise StopRefused(
            f"task {task.id!r}: the process of its run {run_id} is gone; "
            "`assay run --resume` closes the run (refunded) and the task runs again",
            running=True,
        )
    return run_dir


def _journal(
    ledger: Ledger, task: Task, ask: StopAsk, run_id: str | None, now: datetime, *, on: str
) -> None:
    data = {"action": ask.action, "by": ask.by, "via": ask.via, "reason": ask.reason, "on": on}
    ledger.append_event(EventKind.TASK_STOP_REQUESTED, data, at=now, task_id=task.id, run_id=run_id)


def retry_task(ledger: Ledger, task_id: str, *, actor: Actor, now: datetime) -> Task:
    """Let a failed task run now: any wait cleared, attempts kept, recorded with who did it
    (the move ``retry`` of :func:`assay.engine.operations.moves.move_task`).

    Raises the store's ``TaskNotFound`` / ``UnreadableTask``, or ``RetryRefused`` for a task
    that is not failed (a held one is released instead; a queued one runs already)."""
    try:
        return move_task(ledger, task_id, OperatorMove.RETRY, actor=actor, now=now).task
    except MoveRefused as exc:
        task = ledger.get_task(task_id)
        said = str(exc) if task.status is TaskStatus.FAILED else not_failed(task)
        raise RetryRefused(said) from exc


def not_failed(task: Task) -> str:
    """Why a retry is refused, and what fits the task's status instead."""
    said = f"task {task.id!r} is {task.status}, not failed: there is nothing to re-run"
    if task.status is TaskStatus.HELD:
        return f"{said} (`assay task release {task.id}` lets a held task run again)"
    if task.status is TaskStatus.QUEUED:
        return f"{said} (it is queued: `assay serve` runs it)"
    if task.status is TaskStatus.RUNNING:
        return f"{said} (it is running now)"
    return f"{said} (it is done)"
