"""A run's close on PostgreSQL: one statement, so one round trip between its ``BEGIN`` and
``COMMIT``, whatever the run recorded.

Its parts, as data-modifying ``WITH`` parts (each runs once and to completion):

- ``t``: write the settled task; the ``UPDATE`` takes the task's lock (as the other writers'
  ``SELECT … FOR NO KEY UPDATE`` does, so they queue) and returns its spent attempts as they
  stood before this close;
- ``r``: close the run, if it is open and this task's, and only once ``t`` has the task: its
  ``UPDATE … WHERE`` is the run's lock, its check and its write, and its ``RETURNING`` takes
  the event-order lock (``statements.hold_event_order``) once it holds the run's row;
- one insert per table of the close's rows (:func:`batch.recordset_insert`), each gated on
  ``r``: a refused run writes no row, and the events draw their ids under the event-order lock.

The statement returns the stored attempts and the closed run (no row: no such task; no run:
refused). The caller checks the attempts and raises on any refusal, which rolls the whole
transaction back: a close writes all of itself or nothing. Every lock the later parts take is
on a row ``t`` or ``r`` already holds, so taking them in one statement adds no wait that could
deadlock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import sqlalchemy as sa

from assay.adapters.store import batch
from assay.adapters.store import statements as st
from assay.adapters.store.batch import Rows, Shape
from assay.adapters.store.schema import runs, tasks
from assay.core.vocab import Stage

TASK_FIELDS = tuple(c.name for c in st.TASK_COLUMNS if c.name != "id")
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


def close(
    conn: sa.Connection,
    task_id: str,
    run_id: str,
    task_values: Mapping[str, Any],
    run_values: Mapping[str, Any],
    parts: Sequence[Rows],
) -> tuple[int, dict[str, Any] | None] | None:
    """Run the close's statement: None for an unknown task, else the task's spent attempts
    before this close and the closed run's row (None when the run was refused)."""
    parts = [p for p in parts if p.rows]
    values: dict[str, Any] = {"task_key": task_id, "run_key": run_id}
    values.update({f"t_{k}": task_values[k] for k in TASK_FIELDS})
    values.update({f"r_{k}": run_values[k] for k in RUN_FIELDS})
    for k, part in enumerate(parts):
        values[f"w{k}"] = batch.recordset(conn.dialect, part)
    row = conn.execute(_statement(tuple(p.shape() for p in parts)), values).first()
    if row is None:
        return None
    found = row._asdict()
    stored = int(found.pop("stored"))
    return stored, (found if found["id"] is not None else None)


@lru_cache(maxsize=64)
def _statement(shapes: tuple[Shape, ...]) -> sa.TextualSelect:
    task_set = ", ".join(f"{k} = :t_{k}" for k in TASK_FIELDS)
    run_set = ", ".join(f"{k} = :r_{k}" for k in RUN_FIELDS)
    settle = (
        f"UPDATE tasks SET {task_set} WHERE id = :task_key RETURNING COALESCE(("
        "SELECT s.attempts FROM stage_records s"
        f" WHERE s.task_id = tasks.id AND s.stage = '{Stage.TASK.value}'), 0) AS stored"
    )
    finish = (
        f"UPDATE runs SET {run_set} WHERE id = :run_key AND task_id = :task_key"
        " AND finished_at IS NULL AND EXISTS (SELECT FROM t)"
        f" RETURNING runs.*, pg_advisory_xact_lock({st.EVENT_ORDER_LOCK}) AS events_held"
    )
    withs = [f"t AS ({settle})", f"r AS ({finish})"]
    withs += [
        f"w{k} AS ({batch.recordset_insert(shape, f'w{k}', gate='EXISTS (SELECT FROM r)')})"
        for k, shape in enumerate(shapes)
    ]
    chosen = ", ".join(f"r.{c}" for c in RUN_COLUMNS)
    sql = f"WITH {', '.join(withs)} SELECT t.stored, {chosen} FROM t LEFT JOIN r ON true"
    typed = [sa.bindparam(f"t_{k}", type_=tasks.c[k].type) for k in TASK_FIELDS]
    typed += [sa.bindparam(f"r_{k}", type_=runs.c[k].type) for k in RUN_FIELDS]
    typed += [sa.bindparam(f"w{k}", type_=sa.Text()) for k in range(len(shapes))]
    # Typed results: the run's times come back in UTC, as every other read gives them.
    return sa.text(sql).bindparams(*typed).columns(sa.column("stored", sa.Integer()), *runs.c)
