"""The SQL ledger: tasks, runs, attempts, dispatches, stage records and the event log.

One source of truth: a task's spent attempts are its ``task`` stage record, and every other
counter is a stage record too; a loaded ``Task`` gets ``attempts`` from there. Every write is
one transaction, so a crash leaves all of an operation or none of it.

How the ``task`` stage tracks what settle decided: ``Task.start()`` spends the attempt up
front, and ``start_run`` writes that (a crash mid-run therefore still counts the run, so a task
that kills its worker cannot retry forever). ``close_run`` then writes ``task.attempts`` as
settle left it, after checking it is the started count when the settlement says the attempt was
spent, or one less when it was refunded. Outside a run the count can only be reset to zero (a
release); any other change is refused, so a stale copy of a task cannot rewind the counter.

``Task.run_ids`` is likewise read back from the runs table, never stored on the task row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any, Self

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from assay.adapters.store import deletes, moves, run_writes, task_sql, task_totals, usage_log
from assay.adapters.store import run_logs as log_rows
from assay.adapters.store import statements as st
from assay.adapters.store.connect import WRITE_OPTION, default_url, make_engine
from assay.adapters.store.convergence import convergence_ledger
from assay.adapters.store.errors import (
    LedgerConflict,
    LedgerError,
    RunNotFound,
    TaskNotFound,
    UnreadableContract,
    UnreadableTask,
)
from assay.adapters.store.names import HEAD_REVISION
from assay.adapters.store.records import (
    DispatchRecord,
    Event,
    EventIn,
    RunClose,
    RunDocument,
    RunRecord,
)
from assay.adapters.store.run_logs import LogEntry
from assay.adapters.store.schema import attempts, dispatches, events, run_documents, runs, tasks
from assay.adapters.store.task_rows import TaskRow
from assay.adapters.store.task_sql import Everywhere
from assay.adapters.store.usage_log import DispatchKey, DispatchUsage
from assay.core.attempts import AttemptRecord
from assay.core.ledger import ConvergenceLedger
from assay.core.run_logs import KeptLog
from assay.core.tasks import Task
from assay.core.usage import UsageFigures
from assay.core.vocab import EventKind, RunStatus, TaskStatus

MIGRATIONS = "assay.adapters.store:migrations"
_MIGRATE_LOCK = 0x61737361  # "assa": a PostgreSQL advisory lock id for concurrent migrates

__all__ = [
    "HEAD_REVISION",
    "Everywhere",
    "Ledger",
    "LedgerConflict",
    "LedgerError",
    "RunNotFound",
    "TaskNotFound",
    "UnreadableContract",
    "UnreadableTask",
]


class Ledger:
    """The ledger database. Thread-safe: every call takes its own pooled connection."""

    def __init__(self, url: str | None = None, *, schema: str | None = None) -> None:
        self.url = url or default_url()
        self._engine = make_engine(self.url, schema=schema)

    @classmethod
    def open(cls, url: str | None = None, *, schema: str | None = None) -> Self:
        """A ledger whose schema has been brought up to date."""
        ledger = cls(url, schema=schema)
        ledger.migrate()
        return ledger

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- schema -------------------------------------------------------------------------------

    def migrate(self) -> str | None:
        """Create or upgrade the schema to the newest revision; a no-op when already there.

        Runs under the write lock (SQLite) or an advisory lock (PostgreSQL), so two processes
        migrating at once apply each revision once.
        """
        if self.revision() == HEAD_REVISION:
            return HEAD_REVISION  # the common case: no need to load alembic (~0.1 s)
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", MIGRATIONS)
        with self._write() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_MIGRATE_LOCK)))
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
        return self.revision()

    def revision(self) -> str | None:
        """The schema revision the database is at (None before the first migrate)."""
        with self._engine.connect() as conn:
            if not sa.inspect(conn).has_table("alembic_version"):
                return None
            return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()

    # -- tasks --------------------------------------------------------------------------------

    def add_task(self, task: Task, *, contract: Mapping[str, Any] | None = None) -> None:
        """Record a new task, with its contract document when given (see
        :mod:`assay.adapters.store.contracts`); its ``task`` stage starts at ``task.attempts``.
        A task id already in the ledger is a ``LedgerConflict``, and nothing is written."""
        if task.run_ids:
            raise ValueError(f"task {task.id!r}: a new task has no runs yet")
        document = None if contract is None else dict(contract)
        with self._write() as conn:
            conn.execute(
                sa.insert(tasks).values(
                    id=task.id,
                    contract=document,
                    coders=task_totals.coders_text(document),
                    **st.task_values(task),
                )
            )
            st.set_task_attempts(conn, task.id, task.attempts)
            st.append_event(
                conn, task.created_at, EventKind.TASK_ADDED, {"status": task.status}, task.id
            )

    def get_task(self, task_id: str) -> Task:
        unreadable: list[tuple[str, str]] = []
        with self._read() as conn:
            found = st.load_tasks(conn, task_sql.with_id(task_id), unreadable)
        if unreadable:
            raise UnreadableTask(*unreadable[0])
        if not found:
            raise TaskNotFound(f"no task {task_id!r}")
        return found[0]

    def task_contract(self, task_id: str) -> dict[str, Any] | None:
        """The contract document stored with the task, or None for a task queued before
        contracts were kept in the ledger. Raises ``UnreadableContract`` when the stored value
        is not a JSON object (edited by hand), ``TaskNotFound`` for an unknown task."""
        query = sa.select(sa.type_coerce(tasks.c.contract, sa.Text)).where(tasks.c.id == task_id)
        with self._read() as conn:
            row = conn.execute(query).first()
        if row is None:
            raise TaskNotFound(f"no task {task_id!r}")
        value = st.stored_json(row[0])
        if value is None:
            return None
        if not isinstance(value, dict):
            shown = "not JSON" if value is st.UNREADABLE else f"a JSON {type(value).__name__}"
            raise UnreadableContract(task_id, f"it is {shown}, not an object")
        return value

    def adopt_contract(self, task_id: str, contract: Mapping[str, Any]) -> bool:
        """Store ``contract`` with a task that has none yet (one an older assay queued, whose
        contract was a file); never replaces one. True when it was stored."""
        query = (
            sa.update(tasks)
            .where(tasks.c.id == task_id, tasks.c.contract.is_(None))
            .values(contract=dict(contract), coders=task_totals.coders_text(contract))
        )
        with self._write() as conn:
            return conn.execute(query).rowcount == 1

    def list_tasks(self, status: TaskStatus | None = None) -> list[Task]:
        """Tasks oldest first, optionally only those with ``status``; unreadable rows are
        left out (see :meth:`scan_tasks`)."""
        return self.scan_tasks(status)[0]

    def scan_tasks(
        self,
        status: TaskStatus | None = None,
        *,
        runs_in: str | Everywhere | None = Everywhere.EVERY,
    ) -> tuple[list[Task], list[tuple[str, str]]]:
        """Tasks oldest first, and the rows that are not valid tasks as (id, what is wrong),
        so one corrupt row never hides or blocks the others. ``runs_in``: only the tasks a
        worker of that repository may run (its own, and those that name none)."""
        chosen = task_sql.EVERY_TASK if status is None else task_sql.with_status(status.value)
        if not isinstance(runs_in, Everywhere):
            chosen = task_sql.all_of(chosen, task_sql.runs_in(runs_in))
        unreadable: list[tuple[str, str]] = []
        with self._read() as conn:
            return st.load_tasks(conn, chosen, unreadable), unreadable

    def scan_task_rows(
        self, status: TaskStatus | None = None
    ) -> tuple[list[TaskRow], list[tuple[str, str]]]:
        """:meth:`scan_tasks` as ``task list`` prints it: plain rows (read as
        :mod:`.quick_read` reads a SQLite file, by the same function), not models."""
        chosen = task_sql.EVERY_TASK if status is None else task_sql.with_status(status.value)
        with self._read() as conn:
            return st.load_task_rows(conn, chosen)

    def save_task(self, task: Task) -> None:
        """Write an operator's move (hold, release, a diagnostic) outside any run.

        Refused while the task has an open run (the run's close settles it), and refused if
        ``task.attempts`` differs from the ledger other than by a reset to zero.
        """
        with self._write() as conn:
            moves.save_task(conn, task)

    def change_task(self, task_id: str, move: Callable[[Task], Mapping[str, Any]]) -> Task:
        """An operator's move as one read-modify-write under the task's lock: ``move`` gets the
        task as the ledger holds it now, applies a lifecycle move to it (an exception it raises
        writes nothing) and returns what its ``task.saved`` event records beside the status.

        A stale copy therefore cannot undo a run that started or closed since it was read;
        the same refusals as :meth:`save_task` apply. Returns the saved task.
        """
        with self._write() as conn:
            return moves.change_task(conn, task_id, move)

    def delete_tasks(
        self,
        task_ids: Sequence[str],
        *,
        rule: deletes.Rule | None = None,
        all_or_nothing: bool = True,
        dry_run: bool = False,
    ) -> deletes.Deletion:
        """Delete tasks and every row of theirs in one transaction; a running task never (see
        :func:`assay.adapters.store.deletes.delete_tasks`)."""
        with self._write() as conn:
            return deletes.delete_tasks(
                conn, task_ids, rule=rule, all_or_nothing=all_or_nothing, dry_run=dry_run
            )

    # -- runs ---------------------------------------------------------------------------------

    def start_run(
        self,
        task: Task,
        run_id: str,
        *,
        dispatch_id: str | None = None,
        started_at: datetime | None = None,
    ) -> RunRecord:
        """Record a run of ``task`` after ``task.start()``, claiming the task for it.

        The ledger's copy must still be runnable with one attempt fewer than ``task``: a
        second worker that started the same task loses with ``LedgerConflict``.
        """
        if task.status is not TaskStatus.RUNNING:
            raise ValueError(f"task {task.id!r} is {task.status}: call task.start() first")
        record = RunRecord(
            id=run_id,
            task_id=task.id,
            dispatch_id=dispatch_id,
            status=RunStatus.PREP,
            started_at=started_at or task.updated_at,
        )
        with self._write() as conn:
            run_writes.open_run(conn, task, record)
        return record

    def close_run(self, close: RunClose) -> RunRecord:
        """Write everything a run's close records, in one transaction: all of it or none.

        Attempt and dispatch rows, the stage counters, the settled task, the run's status and
        payload path, and the events. Refused (nothing written) if the run is unknown, not this
        task's, already closed, or if the settled ``task.attempts`` is not what the ledger and
        the settlement imply.
        """
        with self._write() as conn:
            closed = run_writes.close_run(conn, close)
            task_totals.refresh_run_seconds(conn, close.task_id)
            return closed

    def get_run(self, run_id: str) -> RunRecord:
        with self._read() as conn:
            row = conn.execute(sa.select(runs).where(runs.c.id == run_id)).first()
        if row is None:
            raise RunNotFound(f"no run {run_id!r}")
        return RunRecord.model_validate(row._asdict())

    def run_document(self, run_id: str) -> RunDocument | None:
        """The documents kept with a closed run; None for an open run, one closed before the
        ledger kept them, or a row that cannot be read (not JSON, not a document: edited by
        hand): its payload file is then the place to look."""
        query = sa.select(run_documents).where(run_documents.c.run_id == run_id)
        try:
            with self._read() as conn:
                row = conn.execute(query).first()
            if row is None:
                return None
            values = row._asdict()
            values.pop("run_id")
            return RunDocument.model_validate(values)
        except ValueError:  # a JSON decode or validation error of the stored row
            return None

    def open_runs(self) -> list[RunRecord]:
        """Runs started and not closed, oldest first: after a crash, the ones to settle."""
        query = sa.select(runs).where(runs.c.finished_at.is_(None)).order_by(*st.RUN_ORDER)
        with self._read() as conn:
            return [RunRecord.model_validate(r._asdict()) for r in conn.execute(query)]

    def runs(self, task_id: str) -> list[RunRecord]:
        """The task's runs in the order they started."""
        query = sa.select(runs).where(runs.c.task_id == task_id).order_by(*st.RUN_ORDER)
        with self._read() as conn:
            return [RunRecord.model_validate(r._asdict()) for r in conn.execute(query)]

    def attempts(self, run_id: str) -> list[AttemptRecord]:
        """The run's attempts; each one's ``coder_dispatches`` is counted from its dispatches."""
        counts = (
            sa.select(dispatches.c.attempt, sa.func.count().label("n"))
            .where(dispatches.c.run_id == run_id)
            .group_by(dispatches.c.attempt)
            .subquery()
        )
        query = (
            sa.select(attempts, sa.func.coalesce(counts.c.n, 0).label("coder_dispatches"))
            .select_from(attempts.outerjoin(counts, counts.c.attempt == attempts.c.attempt))
            .where(attempts.c.run_id == run_id)
            .order_by(attempts.c.attempt)
        )
        with self._read() as conn:
            return [AttemptRecord.model_validate(r._asdict()) for r in conn.execute(query)]

    def dispatches(self, run_id: str) -> list[DispatchRecord]:
        query = (
            sa.select(dispatches)
            .where(dispatches.c.run_id == run_id)
            .order_by(dispatches.c.attempt, dispatches.c.seat)
        )
        with self._read() as conn:
            return [st.dispatch_from_row(r._asdict()) for r in conn.execute(query)]

    # -- the convergence ledger and the event log ---------------------------------------------

    def ledger(self, task_id: str) -> ConvergenceLedger:
        """The task's convergence ledger, rebuilt from its stage records and attempt rows.

        Each judged attempt is one lap; its finding signatures are the lap's set.
        """
        with self._read() as conn:
            return convergence_ledger(conn, task_id)

    def events(self, task_id: str | None = None, *, run_id: str | None = None) -> list[Event]:
        """Events in the order they were appended, optionally of one task and/or run."""
        query = sa.select(events).order_by(events.c.id)
        if task_id is not None:
            query = query.where(events.c.task_id == task_id)
        if run_id is not None:
            query = query.where(events.c.run_id == run_id)
        with self._read() as conn:
            return [Event.model_validate(r._asdict()) for r in conn.execute(query)]

    def events_after(
        self,
        event_id: int,
        limit: int = 100,
        *,
        task_id: str | None = None,
        run_id: str | None = None,
    ) -> list[Event]:
        """At most ``limit`` events with an id above ``event_id``, oldest first: a live tail.

        Start from 0 (or the id of the last event already shown) and pass the last id returned
        on the next call; nothing appended in between is skipped, on either backend (see
        ``statements.hold_event_order``), and an event is never returned twice.
        """
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        query = sa.select(events).where(events.c.id > event_id).order_by(events.c.id).limit(limit)
        if task_id is not None:
            query = query.where(events.c.task_id == task_id)
        if run_id is not None:
            query = query.where(events.c.run_id == run_id)
        with self._read() as conn:
            return [Event.model_validate(r._asdict()) for r in conn.execute(query)]

    def append_event(
        self,
        kind: EventKind | str,
        data: Mapping[str, Any],
        *,
        at: datetime,
        task_id: str | None = None,
        run_id: str | None = None,
    ) -> int:
        """Append one event outside a run's close; returns its id.

        Raises ``pydantic.ValidationError`` (nothing written) for a kind not in
        :class:`EventKind`.
        """
        checked = EventIn.model_validate({"kind": kind, "data": dict(data)})
        with self._write() as conn:
            return st.append_event(conn, at, checked.kind, checked.data, task_id, run_id)

    def record_usage(
        self, key: DispatchKey, increase: UsageFigures, *, priced: bool, at: datetime
    ) -> int:
        """Journal one increase of a dispatch's spending (a usage row and its event)."""
        with self._write() as conn:
            row_id = usage_log.insert_usage(conn, at, key, increase, priced)
            task_totals.refresh_cost(conn, key.task_id)
            return row_id

    def usage(
        self,
        *,
        task_id: str | None = None,
        run_id: str | None = None,
        since: datetime | None = None,
    ) -> list[DispatchUsage]:
        """Each dispatch's journaled spending, of one task, one run, or since a time."""
        with self._read() as conn:
            return usage_log.dispatch_usage(conn, task_id=task_id, run_id=run_id, since=since)

    # -- the run's logs -------------------------------------------------------------------------

    def ship_logs(self, run_id: str, logs: Sequence[KeptLog], *, at: datetime) -> None:
        """Keep ``logs`` (bounded and redacted already) with the run, in one transaction; each
        replaces what an earlier ship kept of the same file."""
        with self._write() as conn:
            log_rows.write_logs(conn, run_id, logs, at)

    def run_logs(self, run_id: str) -> list[LogEntry]:
        """The logs kept with the run, without their text, by name."""
        with self._read() as conn:
            return log_rows.read_logs(conn, run_id)

    def run_log(self, run_id: str, name: str) -> LogEntry | None:
        """One log kept with the run, with its text; None when the ledger has no copy."""
        with self._read() as conn:
            return log_rows.read_log(conn, run_id, name)

    # -- connections --------------------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[sa.Connection]:
        """One write transaction; constraint violations surface as ``LedgerConflict``."""
        try:
            with self._engine.connect() as conn:
                conn.execution_options(**{WRITE_OPTION: True})
                with conn.begin():
                    yield conn
        except IntegrityError as exc:
            raise LedgerConflict(str(exc.orig)) from exc

    def read(self) -> AbstractContextManager[sa.Connection]:
        """One read transaction for a reader that builds its own queries over :mod:`schema`
        (the dashboard's pages); nothing written through it is committed."""
        return self._read()

    @contextmanager
    def _read(self) -> Iterator[sa.Connection]:
        """One read transaction: a consistent snapshot for every query inside it."""
        with self._engine.connect() as conn, conn.begin():
            yield conn
