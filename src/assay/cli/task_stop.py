"""``assay task stop`` and ``assay task retry`` (and ``task hold|cancel`` of a running task):
the CLI's side of :mod:`assay.engine.operations.stopping`, the path the dashboard takes too."""

from __future__ import annotations

import contextlib
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import typer

from assay.cli.workspace import EXIT_INTERNAL, Workspace, fail, print_json
from assay.core.vocab import OperatorMove, TaskStatus

if TYPE_CHECKING:
    from assay.adapters.actor import Actor
    from assay.adapters.store.sql import Ledger
    from assay.core.tasks import Task
    from assay.engine.operations.stopping import Stopping

EXIT_NOT_NOW = 5
"""The task is not in a status the move applies to: ``stop`` of a task that is not running,
``retry`` of one that is not failed (nothing was done)."""

POLL_SECONDS = 0.2


def stop(task_id: str, *, cancel: bool, reason: str | None, json_output: bool, wait: float) -> None:
    """``assay task stop``: exit 0 stopped (or stopping, when ``wait`` ran out), 2 no such
    task or its run is out of reach, 4 an unreadable task, 5 the task is not running."""
    from assay.adapters.actor import cli_actor
    from assay.cli.task_lookup import find_task

    workspace = Workspace.find()
    ledger, task = find_task(workspace, task_id)
    if task.status is not TaskStatus.RUNNING:
        from assay.engine.operations.stopping import not_running

        move = OperatorMove.CANCEL if cancel else OperatorMove.HOLD
        fail(not_running(task, move), EXIT_NOT_NOW)
    stop_running(workspace, ledger, task, cancel, reason, cli_actor(), json_output, wait)


def stop_running(
    workspace: Workspace,
    ledger: Ledger,
    task: Task,
    cancel: bool,
    reason: str | None,
    actor: Actor,
    json_output: bool,
    wait: float,
    *,
    refuse: bool = True,
) -> bool:
    """Ask the running task's run to stop and say what came of it; False when it could not
    be reached and ``refuse`` is off (else: exit 2 saying why)."""
    from assay.adapters.store.errors import TaskNotFound, UnreadableTask
    from assay.cli.temporal_stop import cli_stopper
    from assay.engine.operations.stopping import StopRefused, stop_task

    said: list[str] = []
    temporal = cli_stopper(lambda _task_id, what: said.append(what), wait=wait)
    # Under --json, stdout holds the document only.
    quiet = contextlib.redirect_stdout(sys.stderr) if json_output else contextlib.nullcontext()
    try:
        with quiet:
            sent = stop_task(
                ledger, workspace.home, task.id, cancel=cancel, actor=actor,
                now=datetime.now(UTC), reason=reason, temporal=temporal,
            )  # fmt: skip
    except TaskNotFound:
        fail(f"no task {task.id!r} (see `assay task list`)")
    except UnreadableTask as exc:
        fail(str(exc), EXIT_INTERNAL)
    except StopRefused as exc:
        if not refuse:
            return False
        fail(str(exc), EXIT_NOT_NOW if not exc.running else 2)
    now = _settled(ledger, task.id, wait) if not sent.temporal else ledger.get_task(task.id)
    closed = now.status is not TaskStatus.RUNNING
    if json_output:
        _print_stop(workspace, ledger, now, sent, closed)
    elif closed:
        typer.echo(f"{now.id}: {now.status.value}: {now.hold_reason or ''}".rstrip(": "))
        if now.status is TaskStatus.HELD:
            typer.echo(f"to run it again: assay task release {now.id}")
    else:
        typer.echo(f"{now.id}: {said[-1] if said else 'stopping; held once its run closes'}")
    return True


def _settled(ledger: Ledger, task_id: str, wait: float) -> Task:
    """The task once its run closed, or as it is when ``wait`` seconds ran out."""
    deadline = time.monotonic() + wait
    task = ledger.get_task(task_id)
    while task.status is TaskStatus.RUNNING and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        task = ledger.get_task(task_id)
    return task


def _print_stop(
    workspace: Workspace, ledger: Ledger, task: Task, sent: Stopping, closed: bool
) -> None:
    from assay.cli.task_documents import show_document, task_usage

    runs, usage = ledger.runs(task.id), task_usage(ledger, task.id)
    shown = show_document(ledger, task, runs, workspace.home, datetime.now(UTC), usage)
    ask = sent.ask
    print_json(
        {
            "action": ask.action,
            "by": ask.by,
            "via": ask.via,
            "reason": ask.reason,
            "run_id": sent.run_id,
            "executor": "temporal" if sent.temporal else "local",
            "stopped": closed,
            "task": shown,
        }
    )


def retry(task_id: str, *, json_output: bool) -> None:
    """``assay task retry``: exit 0 runnable now, 2 no such task, 4 unreadable, 5 not failed."""
    from assay.adapters.actor import cli_actor
    from assay.cli.task_documents import show_document, task_usage
    from assay.cli.task_lookup import find_task
    from assay.engine.operations.stopping import RetryRefused, retry_task

    workspace = Workspace.find()
    ledger, _task = find_task(workspace, task_id)
    actor = cli_actor()
    try:
        task = retry_task(ledger, task_id, actor=actor, now=datetime.now(UTC))
    except RetryRefused as exc:
        fail(str(exc), EXIT_NOT_NOW)
    if json_output:
        runs, usage = ledger.runs(task.id), task_usage(ledger, task.id)
        shown = show_document(ledger, task, runs, workspace.home, datetime.now(UTC), usage)
        by, via = actor.by, actor.via.value
        print_json({"action": "retry", "by": by, "via": via, "reason": None, "task": shown})
    else:
        typer.echo(
            f"{task.id}: failed, runnable now (wait cleared; attempts kept: {task.attempts}); "
            "`assay serve` runs it"
        )
