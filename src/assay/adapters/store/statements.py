"""The SQL behind each ledger operation, one function per step.

Each function runs inside a transaction the caller (``Ledger``) owns; none commits. Statements
on the hot paths are built once per dialect (or per number of rows) and executed with
parameters, because building SQLAlchemy statement objects per call costs more than SQLite takes
to run them. The writes of a run's start and close are in :mod:`run_writes`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import cache
from typing import Any

import sqlalchemy as sa
from pydantic import ValidationError
from sqlalchemy.dialects import postgresql, sqlite

from assay.adapters.store import task_sql
from assay.adapters.store.errors import TaskNotFound
from assay.adapters.store.records import DispatchRecord, RunRecord
from assay.adapters.store.schema import events, runs, stage_records, tasks
from assay.adapters.store.task_rows import TaskRow, read_rows
from assay.core.ledger import finding_signatures
from assay.core.tasks import Task
from assay.core.vocab import EventKind, Stage, StageVerdict, TaskStatus

RUN_ORDER = (runs.c.started_at, runs.c.id)
_TASK_STAGE = sa.and_(
    stage_records.c.task_id == tasks.c.id, stage_records.c.stage == Stage.TASK.value
)
_LOCK_TASK = (
    sa.select(tasks.c.status, sa.func.coalesce(stage_records.c.attempts, 0))
    .select_from(tasks.outerjoin(stage_records, _TASK_STAGE))
    .where(tasks.c.id == sa.bindparam("task_id"))
    # NO KEY UPDATE, not UPDATE: writers still queue on the task, but an event's foreign-key
    # check of it (KEY SHARE) does not, so a writer that holds the event-order lock and
    # appends an event of this task never deadlocks with one that holds the task.
    .with_for_update(of=tasks, key_share=True)
)
_LOCK_RUN = (
    sa.select(runs).where(runs.c.id == sa.bindparam("run_id")).with_for_update(key_share=True)
)
DERIVED_TASK_COLUMNS = ("coders", "cost_usd", "cost_unknown", "run_seconds")
"""Columns kept from other rows (:mod:`.task_totals`), never from a task's own fields."""
TASK_COLUMNS = tuple(c for c in tasks.c if c.name not in ("contract", *DERIVED_TASK_COLUMNS))
"""What a task is read from: not its contract, read alone when a run needs it."""
# task_sql's columns typed as the table declares them (its times are UTCDateTime).
_TASK_FIELD_TYPES = tuple(
    tasks.c[name] if name in tasks.c else sa.column(name, sa.Integer)
    for name in task_sql.TASK_FIELDS
)
_UPDATE_TASK = sa.update(tasks).where(tasks.c.id == sa.bindparam("key"))


def task_values(task: Task) -> dict[str, Any]:
    """The ``tasks`` row of a task: no attempts (a stage record) and no run ids (the runs)."""
    return {
        "title": task.title,
        "instruction": task.instruction,
        "status": task.status.value,
        "last_error": task.last_error,
        "hold_reason": task.hold_reason,
        "hold_source": task.hold_source.value if task.hold_source else None,
        "diagnostic": task.diagnostic,
        "created_at": task.created_at,
        "updated_at": task.updated_at,
        "not_before": task.not_before,
        "repository": task.repository,
        "branch": task.branch,
    }


def update_task(conn: sa.Connection, task: Task) -> None:
    conn.execute(_UPDATE_TASK, {"key": task.id, **task_values(task)})


def load_tasks(
    conn: sa.Connection,
    chosen: task_sql.Chosen,
    unreadable: list[tuple[str, str]] | None = None,
) -> list[Task]:
    """The ``chosen`` tasks, oldest first, with attempts from their ``task`` stage record
    and run ids from their runs. A row that is not a valid task (edited by hand, written by a
    newer version) is left out, never raised, and noted in ``unreadable`` as (id, what is
    wrong) when a list is given."""
    params = chosen[1]
    rows = conn.execute(
        sa.text(task_sql.tasks_sql(chosen)).columns(*_TASK_FIELD_TYPES), params
    ).all()
    run_ids: dict[str, list[str]] = {}
    for task_id, run_id in conn.execute(sa.text(task_sql.run_ids_sql(chosen)), params):
        run_ids.setdefault(task_id, []).append(run_id)
    found: list[Task] = []
    for row in rows:
        try:
            found.append(Task.model_validate({**row._asdict(), "run_ids": run_ids.get(row.id, [])}))
        except ValidationError as exc:
            if unreadable is not None:
                unreadable.append((str(row.id), row_problem(exc)))
    return found


def load_task_rows(
    conn: sa.Connection, chosen: task_sql.Chosen
) -> tuple[list[TaskRow], list[tuple[str, str]]]:
    """The ``chosen`` tasks as ``task list`` prints them, read as the driver returns them
    (no column types: :func:`.task_rows.read_rows` reads each driver's values), and the rows
    that are not valid tasks as (id, what is wrong)."""
    params = chosen[1]
    run_ids = conn.execute(sa.text(task_sql.run_ids_sql(chosen)), params).all()
    return read_rows(conn.execute(sa.text(task_sql.tasks_sql(chosen)), params), run_ids)


def row_problem(exc: ValidationError) -> str:
    """A stored row's validation error in one line: each bad column, its value and why."""
    parts = []
    for error in exc.errors():
        column = ".".join(str(p) for p in error["loc"]) or "row"
        value = error.get("input")
        shown = f" {value!r}"[:60] if isinstance(value, str | int | float) else ""
        parts.append(f"{column}{shown}: {error['msg']}")
    return "; ".join(parts)


def stored_json(value: Any) -> Any:
    """A JSON column's value read as text where the driver left it text (SQLite): parsed, or
    :data:`UNREADABLE` when it is not JSON (a hand-edited row must not stop the reader)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return UNREADABLE


UNREADABLE = object()
"""What :func:`stored_json` returns for a column that does not hold JSON."""


def signature_list(value: Any) -> list[str] | None:
    """Finding signatures as stored, or None when they are not a list of strings."""
    parsed = stored_json(value)
    if not isinstance(parsed, list) or not all(isinstance(s, str) for s in parsed):
        return None
    return parsed


def lock_task(conn: sa.Connection, task_id: str) -> tuple[TaskStatus, int] | None:
    """The task's stored status and spent attempts (None if unknown), locking its row on
    PostgreSQL for the rest of the transaction (as an ``UPDATE`` of it would); on SQLite
    ``BEGIN IMMEDIATE`` already holds the database's write lock."""
    row = conn.execute(_LOCK_TASK, {"task_id": task_id}).first()
    return None if row is None else (TaskStatus(row[0]), int(row[1]))


def locked_task(conn: sa.Connection, task_id: str) -> tuple[TaskStatus, int]:
    """:func:`lock_task`, raising ``TaskNotFound`` for an unknown task."""
    found = lock_task(conn, task_id)
    if found is None:
        raise TaskNotFound(f"no task {task_id!r}")
    return found


def lock_run(conn: sa.Connection, run_id: str) -> RunRecord | None:
    row = conn.execute(_LOCK_RUN, {"run_id": run_id}).first()
    return None if row is None else RunRecord.model_validate(row._asdict())


def stage_row(
    task_id: str,
    stage: Stage,
    attempts: int,
    verdict: StageVerdict | None = None,
    signatures: Sequence[str] = (),
) -> dict[str, Any]:
    """A ``stage_records`` row; without ``verdict`` it is unvisited with no signatures."""
    return {
        "task_id": task_id,
        "stage": stage.value,
        "attempts": attempts,
        "last_verdict": (verdict or StageVerdict.UNVISITED).value,
        "last_finding_signatures": finding_signatures(signatures) if verdict is not None else [],
    }


def upsert(dialect: str) -> Callable[[sa.Table], Any]:
    """The dialect's ``insert``, which has ``on_conflict_do_update`` (spelt alike in both)."""
    return postgresql.insert if dialect == "postgresql" else sqlite.insert


@cache
def _set_task_stage(dialect: str) -> sa.Insert:
    # Set, not add: the count is what the caller decided; the verdict is left alone.
    stmt = upsert(dialect)(stage_records)
    set_attempts: sa.Insert = stmt.on_conflict_do_update(
        index_elements=["task_id", "stage"], set_={"attempts": stmt.excluded.attempts}
    )
    return set_attempts


def set_task_attempts(conn: sa.Connection, task_id: str, value: int) -> None:
    """Set the task's spent attempts: the one place that count is kept."""
    conn.execute(_set_task_stage(conn.dialect.name), stage_row(task_id, Stage.TASK, value))


def dispatch_from_row(row: dict[str, Any]) -> DispatchRecord:
    row["dispatch_id"] = row.pop("id")
    del row["run_id"]
    return DispatchRecord.model_validate(row)


def append_event(
    conn: sa.Connection,
    at: datetime,
    kind: EventKind,
    data: Mapping[str, Any],
    task_id: str | None = None,
    run_id: str | None = None,
) -> int:
    """Append one event; returns its id."""
    hold_event_order(conn)
    inserted = conn.execute(
        sa.insert(events)
        .values(at=at, task_id=task_id, run_id=run_id, kind=kind.value, data=dict(data))
        .returning(events.c.id)
    )
    return int(inserted.scalar_one())


EVENT_ORDER_LOCK = 0x61737365  # "asse": a PostgreSQL advisory lock id


def hold_event_order(conn: sa.Connection) -> None:
    """Make event ids commit in the order they are drawn, so a live tail never skips one.

    A reader tails the log by id (``events_after``). On PostgreSQL two transactions can draw
    ids 5 and 6 and commit 6 first: a reader that saw 6 would never look back for 5. Holding
    this lock from the insert to the commit (every caller appends its events last) makes the
    drawing and committing of ids one queue. SQLite has one writer at a time already. (A run's
    close takes it in its run update instead: see :mod:`close_sql`.)
    """
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(EVENT_ORDER_LOCK)))
