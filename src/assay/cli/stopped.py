"""What ``assay run`` does with its tasks when its user stops it (SIGINT / SIGTERM).

The run in progress is closed as interrupted and its task held (manual) in the same
transaction (:func:`assay.engine.local.runner.run_task`'s ``stopped_by``); every other task the
command was to run and had not finished — one a stop reached before its run opened or after
its last boundary (the run ended, runnable, as the stop came), the ones after it — is held
here the same way, so none of them is picked up by ``assay serve`` or another ``assay run
--resume``. ``assay task release ID`` queues one again. A task the stop
came too late for (its run landed, or a halt held it) stays as its run left it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import typer

from assay.core.vocab import HoldSource, OperatorMove, RunStatus, TaskStatus

if TYPE_CHECKING:
    from assay.adapters.actor import Actor
    from assay.adapters.store.sql import Ledger
    from assay.core.tasks import Task
    from assay.engine.local.interrupt import RunInterrupted


def hold_stopped(
    ledger: Ledger,
    task_ids: list[str],
    signum: int,
    actor: Actor,
    interrupted: tuple[str, RunInterrupted] | None,
    ended: set[str],
) -> None:
    """Hold each of ``task_ids`` that would run again, and say what became of each
    (``interrupted``: the task whose run the stop ended, and the stop; ``ended``: those whose
    run ended by itself as the stop came)."""
    from assay.engine.local.interrupt import stop_reason
    from assay.engine.operations.moves import MoveRefused, move_task

    reason = stop_reason(signum)
    for task_id in task_ids:
        try:
            task = move_task(
                ledger, task_id, OperatorMove.HOLD, actor=actor, now=_now(), reason=reason
            ).task
        except MoveRefused:  # running elsewhere by now, done, or held already (by its close)
            task = ledger.get_task(task_id)
        if interrupted is not None and interrupted[0] == task_id:
            typer.echo(interrupted_line(ledger, task, interrupted[1], reason), err=True)
        elif _held_by_us(task, reason):
            ran = "its run ended as it was stopped" if task_id in ended else "not started"
            typer.echo(f"task {task_id}: {ran}; held: {reason}{_way_back(task_id)}", err=True)


def interrupted_line(ledger: Ledger, task: Task, stop: RunInterrupted, reason: str) -> str:
    """``task t…: interrupted by SIGINT; the run closed as interrupted (refunded, this run does
    not count) and the task is held: stopped by the user (Ctrl-C)``, then how to run it again."""
    from assay.cli.outcome import state_said

    head = f"task {task.id}: {stop}"
    run = ledger.get_run(task.run_ids[-1]) if task.run_ids and stop.payload_path else None
    closed = "" if run is None else f"; the run closed as {_run_words(run.status.value)}"
    if _held_by_us(task, reason):
        refund = ""
        if run is not None and run.attempt_spent is False:
            refund = " (refunded, this run does not count)"
        return f"{head}{closed}{refund} and the task is held: {reason}{_way_back(task.id)}"
    return f"{head}{closed}; the task is {state_said(task.status, task.id)}"


def _held_by_us(task: Task, reason: str) -> bool:
    return (
        task.status is TaskStatus.HELD
        and task.hold_source is HoldSource.MANUAL
        and task.hold_reason == reason
    )


def _way_back(task_id: str) -> str:
    return (
        f"\nto run it again: assay task release {task_id}"
        f" (then assay run --task {task_id}, or assay serve)"
    )


def _run_words(status: str) -> str:
    """A run a stop ended without landing is closed failed: the README calls it interrupted."""
    return "interrupted" if status == RunStatus.FAILED.value else status


def _now() -> datetime:
    return datetime.now(UTC)
