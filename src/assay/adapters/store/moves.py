"""An operator's writes outside any run: hold, release, a diagnostic (``Ledger.save_task`` and
``Ledger.change_task``), each under the task's lock, refused while a run is open."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import sqlalchemy as sa

from assay.adapters.store import statements as st
from assay.adapters.store import task_sql
from assay.adapters.store.errors import LedgerConflict, UnreadableTask
from assay.adapters.store.schema import runs
from assay.core.tasks import Task
from assay.core.vocab import EventKind


def save_task(conn: sa.Connection, task: Task) -> None:
    """Write ``task`` as the caller moved it (see ``Ledger.save_task``)."""
    _status, stored = st.locked_task(conn, task.id)
    _save_outside_run(conn, task, stored, {})


def change_task(
    conn: sa.Connection, task_id: str, move: Callable[[Task], Mapping[str, Any]]
) -> Task:
    """Lock, read, ``move`` and write the task in one transaction (see ``Ledger.change_task``)."""
    _status, stored = st.locked_task(conn, task_id)
    unreadable: list[tuple[str, str]] = []
    found = st.load_tasks(conn, task_sql.with_id(task_id), unreadable)
    if unreadable:
        raise UnreadableTask(*unreadable[0])
    task = found[0]
    extra = move(task)
    _save_outside_run(conn, task, stored, extra)
    return task


def _save_outside_run(
    conn: sa.Connection, task: Task, stored: int, extra: Mapping[str, Any]
) -> None:
    """The task row, its attempts (only ever reset to 0 here) and its ``task.saved`` event."""
    open_run = conn.execute(
        sa.select(runs.c.id).where(runs.c.task_id == task.id, runs.c.finished_at.is_(None))
    ).scalar()
    if open_run is not None:
        raise LedgerConflict(f"task {task.id!r} has run {open_run!r} open")
    if task.attempts not in (stored, 0):
        raise LedgerConflict(
            f"task {task.id!r}: attempts {task.attempts} but the ledger holds {stored}; "
            "outside a run they can only be reset to 0"
        )
    st.update_task(conn, task)
    if task.attempts != stored:
        st.set_task_attempts(conn, task.id, task.attempts)
    data = {"status": task.status, **extra}
    st.append_event(conn, task.updated_at, EventKind.TASK_SAVED, data, task.id)
