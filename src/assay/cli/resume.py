"""What `assay run --resume` says about the runs it recovered, and the exit code they make.

One line per recovered run, with what recovery made of it and of its task; the exit code,
when nothing is left to run, is theirs: 3 when a recovered task is now held for a human
(the refund streak, say), else 0 (every one is done, or runnable again).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import typer

from assay.cli.workspace import EXIT_DONE, EXIT_HELD, Workspace, fail
from assay.core.text import shown
from assay.core.vocab import RunStatus, TaskStatus

if TYPE_CHECKING:
    from assay.adapters.store.records import RunRecord
    from assay.adapters.store.sql import Ledger
    from assay.core.tasks import Task


def stored_ledger(workspace: Workspace, task_id: str | None) -> Ledger:
    """The ledger of ``run --task ID`` / ``run --resume``, which queue nothing new: where there
    is none yet nothing is created, and the command says there is nothing to run."""
    ledger = workspace.existing_ledger()
    if ledger is not None:
        return ledger
    if task_id is not None:
        fail(f"no task {task_id!r} (see `assay task list`)")
    typer.echo("no interrupted run to resume", err=True)
    raise typer.Exit(EXIT_DONE)


def recovered_line(record: RunRecord, task: Task, now: datetime) -> str:
    """``recovered r…: merged (task t… done)`` and the like, for one recovered run."""
    head = f"recovered {record.id}: "
    if task.status is TaskStatus.HELD:
        return head + f"held (task {task.id}): {shown(task.hold_reason or 'held for a human')}"
    if record.status in (RunStatus.MERGED, RunStatus.READY):
        return head + f"{record.status.value} (task {task.id} {task.status.value})"
    if task.waiting(now) and task.not_before is not None:
        state = f"failed, runnable after {task.not_before:%Y-%m-%d %H:%M:%S %Z}"
    elif task.runnable(now):
        state = f"{task.status.value}, runnable"
    else:
        state = task.status.value
    spent = "refunded" if record.attempt_spent is False else "attempt spent"
    return head + f"interrupted, {spent} (task {task.id} {state})"


def recovered_exit(tasks: list[Task]) -> int:
    """3 when recovery left a task held for a human, else 0."""
    return EXIT_HELD if any(t.status is TaskStatus.HELD for t in tasks) else EXIT_DONE
