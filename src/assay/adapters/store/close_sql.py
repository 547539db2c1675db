"""The SQL of a run's close: its two updates, spelt once for both dialects, and on PostgreSQL
the one statement that is the whole close.

- settle the task: the ``UPDATE`` takes the task's lock (on PostgreSQL as the other writers'
  ``SELECT … FOR NO KEY UPDATE`` does, so they queue; on SQLite ``BEGIN IMMEDIATE`` holds the
  database's) and returns the task's spent attempts as they stood before this close;
- finish the run, if it is open and this task's: its ``UPDATE … WHERE`` is the run's lock,
  its check and its write, and it returns the closed row (nothing: refused).

On PostgreSQL, where a statement is a round trip, :func:`close_in_one_statement` runs both,
and the inserts of the close's rows, as one statement of data-modifying ``WITH`` parts (each
runs once and to completion): ``t`` settles the task; ``r`` finishes the run only once ``t``
has the task, and its ``RETURNING`` takes the event-order lock
(``statements.hold_event_order``) once it holds the run's row; each table's insert
(:func:`batch.recordset_insert`) is gated on ``r``, so a refused run writes no row and the
events draw their ids under that lock. Every lock the later parts take is on a row ``t`` or
``r`` already holds, so one statement adds no wait that could deadlock. The caller checks
what it returns and raises on a refusal, which rolls the whole transaction back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cache, lru_cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from assay.adapters.store import batch
from assay.adapters.store import statements as st
from assay.adapters.store.batch import Rows, Shape
from assay.adapters.store.driver import DriverStatement
from assay.adapters.store.schema import runs, tasks
from assay.core.vocab import Stage

WRITTEN_TASK_FIELDS = tuple(c.name for c in st.TASK_COLUMNS if c.name != "id")
"""The task columns a close writes: all but its id (and its contract, never rewritten)."""
RUN_FIELDS = (
    "status",
    "finished_at",
    "settle_row",
    "attempt_spent",
    "task_status",
    "reason",
    "payload_path",
)
"""The run columns a close writes."""
RUN_COLUMNS = tuple(c.name for c in runs.c)

Placeholder = Callable[[str], str]
"""How a statement names the parameter for a column (``?`` or ``:t_title``)."""


def settle_task_sql(param: Placeholder) -> str:
    assignments = ", ".join(f"{k} = {param(k)}" for k in WRITTEN_TASK_FIELDS)
    return (
        f"UPDATE tasks SET {assignments} WHERE id = {param('id')} RETURNING COALESCE(("
        "SELECT s.attempts FROM stage_records s"
        f" WHERE s.task_id = tasks.id AND s.stage = '{Stage.TASK.value}'), 0) AS stored"
    )


def finish_run_sql(param: Placeholder, *, gate: str = "", returning: str = "") -> str:
    assignments = ", ".join(f"{k} = {param(k)}" for k in RUN_FIELDS)
    return (
        f"UPDATE runs SET {assignments} WHERE id = {param('id')}"
        f" AND task_id = {param('task_id')} AND finished_at IS NULL{gate}"
        f" RETURNING {', '.join(RUN_COLUMNS)}{returning}"
    )


@cache
def sqlite_statements(dialect: Dialect) -> tuple[DriverStatement, DriverStatement]:
    """SQLite: the settle and finish updates, to run on the driver (:mod:`driver`)."""
    settle = settle_task_sql(lambda _k: "?")
    finish = finish_run_sql(lambda _k: "?")
    task_params = [tasks.c[k] for k in (*WRITTEN_TASK_FIELDS, "id")]
    run_params = [runs.c[k] for k in (*RUN_FIELDS, "id", "task_id")]
    return (
        DriverStatement.build(settle, dialect, task_params),
        DriverStatement.build(finish, dialect, run_params),
    )


def close_in_one_statement(
    conn: sa.Connection,
    task_id: str,
    run_id: str,
    task_values: Mapping[str, Any],
    run_values: Mapping[str, Any],
    parts: Sequence[Rows],
) -> tuple[int, dict[str, Any] | None] | None:
    """PostgreSQL: run the close's statement: None for an unknown task, else the task's spent
    attempts before this close and the closed run's row (None when the run was refused)."""
    parts = [p for p in parts if p.rows]
    values: dict[str, Any] = {"t_id": task_id, "r_id": run_id, "r_task_id": task_id}
    values.update({f"t_{k}": task_values[k] for k in WRITTEN_TASK_FIELDS})
    values.update({f"r_{k}": run_values[k] for k in RUN_FIELDS})
    for k, part in enumerate(parts):
        values[f"w{k}"] = batch.recordset(conn.dialect, part)
    row = conn.execute(_one_statement(tuple(p.shape() for p in parts)), values).first()
    if row is None:
        return None
    found = row._asdict()
    stored = int(found.pop("stored"))
    return stored, (found if found["id"] is not None else None)


@lru_cache(maxsize=64)
def _one_statement(shapes: tuple[Shape, ...]) -> sa.TextualSelect:
    settle = settle_task_sql(lambda k: f":t_{k}")
    finish = finish_run_sql(
        lambda k: f":r_{k}",
        gate=" AND EXISTS (SELECT FROM t)",
        returning=f", pg_advisory_xact_lock({st.EVENT_ORDER_LOCK}) AS events_held",
    )
    withs = [f"t AS ({settle})", f"r AS ({finish})"]
    withs += [
        f"w{k} AS ({batch.recordset_insert(shape, f'w{k}', gate='EXISTS (SELECT FROM r)')})"
        for k, shape in enumerate(shapes)
    ]
    chosen = ", ".join(f"r.{c}" for c in RUN_COLUMNS)
    sql = f"WITH {', '.join(withs)} SELECT t.stored, {chosen} FROM t LEFT JOIN r ON true"
    typed = [sa.bindparam(f"t_{k}", type_=tasks.c[k].type) for k in WRITTEN_TASK_FIELDS]
    typed += [sa.bindparam(f"r_{k}", type_=runs.c[k].type) for k in RUN_FIELDS]
    typed += [sa.bindparam(f"w{k}", type_=sa.Text()) for k in range(len(shapes))]
    # Typed results: the run's times come back in UTC, as every other read gives them.
    return sa.text(sql).bindparams(*typed).columns(sa.column("stored", sa.Integer()), *runs.c)
