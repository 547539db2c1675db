"""``assay task list``'s read of a SQLite ledger on the standard library's ``sqlite3``.

Importing SQLAlchemy and pydantic takes longer than that command may take in all, so on a
SQLite ledger at the Ledger's own revision (:data:`~.names.HEAD_REVISION`) it reads here,
through a read-only connection, the Ledger's own SQL text (:mod:`.task_sql`) into the
Ledger's own row type (:mod:`.task_rows`, which ``task list`` prints from on every backend).
What this module cannot read raises :class:`NotQuick` and the caller asks the
:class:`~assay.adapters.store.sql.Ledger`: no ledger file yet (the Ledger creates it), another
revision or backend, a locked file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path

from assay.adapters.store import task_sql
from assay.adapters.store.names import HEAD_REVISION
from assay.adapters.store.task_rows import TaskRow, read_rows
from assay.core.vocab import TaskStatus

BUSY_TIMEOUT_SECONDS = 0.25
"""Reads in WAL mode do not wait for writers; a file locked longer than this goes to the
Ledger, which waits ``$ASSAY_DB_TIMEOUT`` and names the lock."""


class NotQuick(Exception):
    """This read is the Ledger's to answer (see the module's text for when)."""


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
        if found != [(HEAD_REVISION,)]:
            raise NotQuick(f"the ledger is at revision {found!r}, not {HEAD_REVISION}")

    def tasks(
        self, status: TaskStatus | None = None
    ) -> tuple[list[TaskRow], list[tuple[str, str]]]:
        """:meth:`Ledger.scan_task_rows <assay.adapters.store.sql.Ledger.scan_task_rows>`."""
        chosen = task_sql.EVERY_TASK if status is None else task_sql.with_status(status.value)
        with self._read() as conn:
            run_ids = conn.execute(task_sql.run_ids_sql(chosen), chosen[1]).fetchall()
            rows = conn.execute(task_sql.tasks_sql(chosen), chosen[1])
            return read_rows(rows, run_ids)

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
