"""``assay task list``'s read of the ledger on the standard library's ``sqlite3``.

Importing SQLAlchemy and pydantic takes longer than that command may take in all, so on a
SQLite ledger at :data:`REVISION` it reads here, through a read-only connection, and builds
the same documents the models would, with the Ledger's own SQL text
(:mod:`.task_sql`). Whatever this module is not sure of raises
:class:`NotQuick` and the caller asks the :class:`~assay.adapters.store.sql.Ledger`, whose
answer is the reference: no ledger file yet (the Ledger creates it), another revision or
backend, a locked file, or a row the models might judge differently (a hand-edited value, a
status this version does not know — the Ledger reports such rows as unreadable). A test reads
one ledger both ways and compares the command's output.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Any

from assay.adapters.store import task_sql
from assay.adapters.store.quick_rows import NotQuick, TaskRow, checked_time, parse_time
from assay.core.vocab import HoldSource, TaskStatus

REVISION = "0008"
"""The schema revision these queries were written for (a test pins it to the Ledger's head)."""
BUSY_TIMEOUT_SECONDS = 0.25
"""Reads in WAL mode do not wait for writers; a file locked longer than this goes to the
Ledger, which waits ``$ASSAY_DB_TIMEOUT`` and names the lock."""

_TASK_STATUS = {s.value: s for s in TaskStatus}
_HOLD_SOURCE = {s.value: s for s in HoldSource}
_OPTIONAL_TEXT = (str, type(None))


class Names(StrEnum):
    """What :meth:`QuickLedger.names` lists."""

    TASKS = "tasks"
    RUNS = "runs"


_NAMES = {
    Names.TASKS: "SELECT id, status, title FROM tasks ORDER BY created_at DESC, id",
    Names.RUNS: "SELECT id, status, task_id FROM runs ORDER BY started_at DESC, id",
}


class QuickLedger:
    """A read-only view of a SQLite ledger file; each method reads one snapshot."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise NotQuick(f"no ledger file at {path} yet")
        self._uri = f"{path.absolute().as_uri()}?mode=ro"
        with self._read() as conn:
            found = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        if found != [(REVISION,)]:
            raise NotQuick(f"the ledger is at revision {found!r}, not {REVISION}")

    def tasks(self, status: TaskStatus | None = None) -> list[TaskRow]:
        """Every task (or those with ``status``) oldest first, as ``Ledger.scan_tasks``."""
        chosen = task_sql.EVERY_TASK if status is None else task_sql.with_status(status.value)
        with self._read() as conn:
            return _task_rows(conn, chosen)

    def names(self, table: Names) -> list[tuple[str, str]]:
        """Every task's (or run's) id with a few words on it, newest first: what a shell offers
        where an id is expected. Rows a model would judge are shown as they are stored."""
        query = _NAMES[table]
        with self._read() as conn:
            return [
                (row[0], " ".join(str(part) for part in row[1:] if part))
                for row in conn.execute(query)
                if type(row[0]) is str and row[0]
            ]

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = sqlite3.connect(
                self._uri, uri=True, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None
            )
        except sqlite3.Error as exc:
            raise NotQuick(str(exc)) from exc
        try:
            conn.execute("BEGIN")  # one snapshot for every query of the call
            yield conn
        except sqlite3.Error as exc:  # locked, a table missing, not a database, ...
            raise NotQuick(str(exc)) from exc
        finally:
            conn.close()


def _task_rows(conn: sqlite3.Connection, chosen: task_sql.Chosen) -> list[TaskRow]:
    run_ids: dict[str, list[str]] = {}
    for task_id, run_id in conn.execute(task_sql.run_ids_sql(chosen), chosen[1]):
        run_ids.setdefault(task_id, []).append(_text(run_id))
    rows = conn.execute(task_sql.tasks_sql(chosen), chosen[1])
    return [_task_row(row, run_ids) for row in rows]


def _task_row(row: tuple[Any, ...], run_ids: dict[str, list[str]]) -> TaskRow:
    # Checked inline, not through the helpers below: this runs once per task of a list.
    # The row holds task_sql.TASK_FIELDS, in that order.
    task_id, title, instruction, status, last_error, hold_reason, hold_source = row[:7]
    diagnostic, created_at, updated_at, not_before, attempts = row[7:]
    if not (
        type(task_id) is str
        and task_id
        and type(title) is str
        and type(instruction) is str
        and type(status) is str
        and status in _TASK_STATUS
        and (hold_source is None or (type(hold_source) is str and hold_source in _HOLD_SOURCE))
        and type(last_error) in _OPTIONAL_TEXT
        and type(hold_reason) in _OPTIONAL_TEXT
        and type(diagnostic) in _OPTIONAL_TEXT
        and type(attempts) is int
        and attempts >= 0
    ):
        raise NotQuick(f"task {task_id!r}: a value the models would judge")
    return TaskRow(
        task_id,
        title,
        instruction,
        _TASK_STATUS[status],
        attempts,
        last_error,
        hold_reason,
        None if hold_source is None else _HOLD_SOURCE[hold_source],
        diagnostic,
        run_ids.get(task_id, []),
        None if not_before is None else parse_time(not_before),
        checked_time(created_at),
        checked_time(updated_at),
    )


def _text(value: object) -> str:
    if type(value) is not str:
        raise NotQuick(f"{value!r} is not text")
    return value
