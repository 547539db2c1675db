"""Finding a task the command line names: the ledger's row, or a clear exit saying why not."""

from __future__ import annotations

from typing import TYPE_CHECKING

from assay.cli.workspace import EXIT_INTERNAL, Workspace, fail

if TYPE_CHECKING:
    from assay.adapters.store.sql import Ledger
    from assay.core.tasks import Task


def stored_task(ledger: Ledger | None, task_id: str) -> Task:
    """The task, or exit 2 (4 for an unreadable row) saying why not; ``ledger`` None: there is
    none yet, so no task either."""
    from assay.adapters.store.sql import TaskNotFound, UnreadableTask
    from assay.core.contract import unstorable_text

    if unstorable_text(task_id) is not None:
        fail(f"no task {task_id!r}: the id is not valid text (see `assay task list`)")
    if ledger is None:
        fail(f"no task {task_id!r} (see `assay task list`)")
    try:
        return ledger.get_task(task_id)
    except UnreadableTask as exc:
        fail(str(exc), EXIT_INTERNAL)
    except TaskNotFound:
        fail(f"no task {task_id!r} (see `assay task list`)")


def find_task(workspace: Workspace, task_id: str) -> tuple[Ledger, Task]:
    """The ledger and the task in it, or exit saying why not; where there is no ledger yet
    none is created (there is no task either)."""
    ledger = workspace.existing_ledger()
    task = stored_task(ledger, task_id)
    assert ledger is not None  # (stored_task exits without one)
    return ledger, task
