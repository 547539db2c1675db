"""The writes that open and close a run, in as few statements as their guarantees allow.

Every worker closes a run after each task, so the close is the ledger's hot write. It is one
transaction (all of it or none) of a fixed number of statements, whatever the run recorded.
On PostgreSQL, where a statement is a round trip, it is one statement (see
:mod:`close_sql`). On SQLite it is at most seven, run on the driver (:mod:`driver`), in
this order:

1. write the settled task: the ``UPDATE`` returns its spent attempts as they stood;
2. close the run: one ``UPDATE … WHERE`` open and this task's ``… RETURNING`` is the run's
   check and its write (a refused update is explained by a second read, only then); then the
   settled attempts are checked against the ledger's (a refusal rolls back both);
3. every stage counter in one upsert (the ``task`` stage set, the others added);
4. the attempts, 5. the dispatches, 6. the run's documents, 7. the events, last: one
   ``executemany`` each, for the tables that have rows.

A test counts these statements, so a change that adds a round trip shows.
"""

from __future__ import annotations

from functools import cache
from typing import Any, NoReturn

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from assay.adapters.store import batch, close_sql, driver
from assay.adapters.store import statements as st
from assay.adapters.store.batch import Rows
from assay.adapters.store.errors import LedgerConflict, RunNotFound, TaskNotFound
from assay.adapters.store.records import EventIn, RunClose, RunRecord
from assay.adapters.store.schema import (
    attempts,
    dispatches,
    events,
    run_documents,
    runs,
    stage_records,
)
from assay.core.ledger import finding_signatures, outcome_verdict, task_verdict
from assay.core.tasks import Task
from assay.core.vocab import EventKind, Stage, TaskStatus

_INSERT_RUN = sa.insert(runs)


def open_run(conn: sa.Connection, task: Task, record: RunRecord) -> None:
    """Claim ``task`` (after ``task.start()``) for the run ``record``: see ``Ledger.start_run``."""
    status, stored = st.locked_task(conn, task.id)
    if status not in (TaskStatus.QUEUED, TaskStatus.FAILED):
        raise LedgerConflict(f"task {task.id!r} is {status} in the ledger, not runnable")
    if task.attempts != stored + 1:
        raise LedgerConflict(
            f"task {task.id!r}: started with attempts {task.attempts}, "
            f"but the ledger holds {stored} before this run"
        )
    conn.execute(_INSERT_RUN, record.model_dump(exclude={"finished_at"}))
    st.update_task(conn, task)
    st.set_task_attempts(conn, task.id, task.attempts)
    data = {"dispatch_id": record.dispatch_id}
    st.append_event(conn, record.started_at, EventKind.RUN_OPENED, data, task.id, record.id)


def close_run(conn: sa.Connection, close: RunClose) -> RunRecord:
    """Everything ``close`` records (see ``Ledger.close_run``); returns the closed run."""
    if conn.dialect.name == "postgresql":
        return _close_in_one_statement(conn, close)
    stored = settle_task(conn, close.task)
    closed = finish_run(conn, close)
    check_settled_attempts(close, stored)
    write_rows(conn, close)
    return closed


def _close_in_one_statement(conn: sa.Connection, close: RunClose) -> RunRecord:
    task = close.task
    found = close_sql.close_in_one_statement(
        conn, task.id, close.run_id, st.task_values(task), run_values(close), row_parts(close)
    )
    if found is None:
        raise TaskNotFound(f"no task {task.id!r}")
    stored, closed = found
    if closed is None:
        explain_refused_run(conn, close)
    check_settled_attempts(close, stored)
    return RunRecord.model_validate(closed)


def check_settled_attempts(close: RunClose, stored: int) -> None:
    """Refuse a close whose settled ``task.attempts`` is not what the ledger's count before
    it (``stored``) and the settlement imply."""
    task = close.task
    expected = stored if close.settlement.attempt_spent else max(0, stored - 1)
    if task.attempts != expected:
        raise LedgerConflict(
            f"task {task.id!r}: settled attempts {task.attempts}, expected {expected} "
            f"(ledger {stored}, attempt spent: {close.settlement.attempt_spent})"
        )


def settle_task(conn: sa.Connection, task: Task) -> int:
    """SQLite: write the task as settle left it; returns its spent attempts as they stood
    before this close, for the caller to check. ``TaskNotFound`` for an unknown task."""
    settle, _finish = close_sql.sqlite_statements(conn.dialect)
    stored = driver.execute(conn, settle, {"id": task.id, **st.task_values(task)})
    if not stored:
        raise TaskNotFound(f"no task {task.id!r}")
    return int(stored[0][0])


def run_values(close: RunClose) -> dict[str, Any]:
    """What the close writes on the run's row."""
    return {
        "status": close.status.value,
        "finished_at": close.finished_at,
        "settle_row": close.settlement.row.value,
        "attempt_spent": close.settlement.attempt_spent,
        "task_status": close.task.status.value,
        "reason": close.reason,
        "payload_path": close.payload_path,
    }


def finish_run(conn: sa.Connection, close: RunClose) -> RunRecord:
    """SQLite: mark the run closed with what settle made of it, if it is open and the task's;
    returns the closed record."""
    _settle, finish = close_sql.sqlite_statements(conn.dialect)
    values = {"id": close.run_id, "task_id": close.task_id, **run_values(close)}
    rows = driver.execute(conn, finish, values)
    if not rows:
        explain_refused_run(conn, close)
    return RunRecord.model_validate(_run_reader(conn.dialect)(rows[0]))


@cache
def _run_reader(dialect: Dialect) -> driver.Reader:
    return driver.reader(dialect, list(runs.c))


def explain_refused_run(conn: sa.Connection, close: RunClose) -> NoReturn:
    """Why the run's guarded update matched nothing: unknown, another task's, or closed."""
    run = st.lock_run(conn, close.run_id)
    if run is None:
        raise RunNotFound(f"no run {close.run_id!r}")
    if run.task_id != close.task_id:
        raise LedgerConflict(f"run {close.run_id!r} belongs to task {run.task_id!r}")
    raise LedgerConflict(f"run {close.run_id!r} is already closed")


_SET, _RECOVER = Stage.TASK.value, Stage.RECOVER.value
_STAGES_TAIL = (
    " ON CONFLICT (task_id, stage) DO UPDATE SET"
    f" attempts = CASE WHEN excluded.stage = '{_SET}' THEN excluded.attempts"
    " ELSE stage_records.attempts + excluded.attempts END,"
    f" last_verdict = CASE WHEN excluded.stage IN ('{_SET}', '{_RECOVER}')"
    " THEN excluded.last_verdict ELSE stage_records.last_verdict END,"
    f" last_finding_signatures = CASE WHEN excluded.stage IN ('{_SET}', '{_RECOVER}')"
    " THEN excluded.last_finding_signatures ELSE stage_records.last_finding_signatures END"
)
"""How the close's stage rows meet the stored ones: the ``task`` stage's count is set (settle
decided it), every other stage's is added in SQL (no read-modify-write, so concurrent writers
cannot lose an update); only the ``task`` and ``recover`` verdicts are replaced. SQLite and
PostgreSQL spell this alike."""


def write_rows(conn: sa.Connection, close: RunClose) -> None:
    """SQLite: the close's rows, one ``executemany`` per table, the events last."""
    batch.insert(conn, row_parts(close))


def row_parts(close: RunClose) -> list[Rows]:
    """The close's rows, table by table: stage counters, attempts, dispatches, documents,
    then its events (last, so their ids follow every other row's)."""
    parts = [stage_rows(close), attempt_rows(close), dispatch_rows(close)]
    return [*parts, document_rows(close), event_rows(close)]


def stage_rows(close: RunClose) -> Rows:
    """The close's counters and verdicts: the ``task`` stage is set to what settle decided
    (with the task's verdict), ``recover`` takes the last attempt's verdict, the other stages
    only count. Both verdicts carry the last attempt's finding signatures."""
    last = max(close.attempts, key=lambda a: a.attempt, default=None)
    signatures = last.finding_signatures if last is not None else []
    verdict = task_verdict(close.task.status)
    rows = [st.stage_row(close.task_id, Stage.TASK, close.task.attempts, verdict, signatures)]
    increments = close.stage_increments()
    recovered = increments.pop(Stage.RECOVER)
    if last is not None:
        judged = outcome_verdict(last.outcome)
        rows.append(st.stage_row(close.task_id, Stage.RECOVER, recovered, judged, signatures))
    rows.extend(st.stage_row(close.task_id, s, n) for s, n in increments.items() if n)
    return Rows(stage_records, rows, _STAGES_TAIL)


def attempt_rows(close: RunClose) -> Rows:
    rows = [
        {
            "run_id": close.run_id,
            "attempt": a.attempt,
            "outcome": a.outcome.value,
            "failures": list(a.failures),
            "finding_signatures": finding_signatures(a.finding_signatures),
        }
        for a in close.attempts
    ]
    return Rows(attempts, rows)


def dispatch_rows(close: RunClose) -> Rows:
    rows = [
        {**d.model_dump(mode="json", exclude={"dispatch_id"}), "id": d.dispatch_id}
        | {"run_id": close.run_id}
        for d in close.dispatches
    ]
    return Rows(dispatches, rows)


def document_rows(close: RunClose) -> Rows:
    """The run's documents (payload, chosen diff, halt states), when the close carries them."""
    document = close.document
    if document is None:
        return Rows(run_documents, [])
    return Rows(run_documents, [{"run_id": close.run_id, **document.model_dump(mode="json")}])


def event_rows(close: RunClose) -> Rows:
    """The caller's events, then ``run.closed`` with what settle did (facts, no counters)."""
    summary: dict[str, Any] = {
        "status": close.status.value,
        "settle_row": close.settlement.row.value,
        "attempt_spent": close.settlement.attempt_spent,
        "task_status": close.task.status.value,
        "payload_path": close.payload_path,
    }
    if close.usage is not None:
        summary["usage"] = close.usage
    entries = [*close.events, EventIn(kind=EventKind.RUN_CLOSED, data=summary)]
    rows = [
        {
            "at": close.finished_at,
            "task_id": close.task_id,
            "run_id": close.run_id,
            "kind": e.kind.value,
            "data": e.data,
        }
        for e in entries
    ]
    return Rows(events, rows)
