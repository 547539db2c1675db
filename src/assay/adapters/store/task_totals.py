"""What the queue filters and sorts tasks by, kept on each task's row: the coders its contract
names, what its dispatches cost and how long its runs took.

Each is written in the transaction that changes what it is made of (the contract stored at
``add_task``/``adopt_contract``, a usage row journaled, a run closed), recomputed from those
rows (the cost from each dispatch's totals; never incremented), so it is what summing them
would say: the known cost is the sum of :func:`.usage_log.spend_of`'s ``priced_cost_usd``,
``cost_unknown`` its ``unpriced + unreported``; ``run_seconds`` the sum over the task's closed
runs of finished minus started; ``sort_attempts`` the count of its ``task`` stage record (the
one place that counter lives: this copy, read back from it after every write of that row, only
lets the queue sort by it through an index).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from assay.adapters.store.schema import dispatch_totals, runs, stage_records, tasks

CODERS_SEPARATOR = "|"


def coders_text(contract: Mapping[str, Any] | None) -> str | None:
    """The coders a stored contract names, as ``|kind=claude|model=opus-4|kind=llm|`` (each
    entry closed by ``|``, so a filter matches a whole kind or a model's start; lower-cased);
    None when it names none (no contract, or the default coder left unset)."""
    if contract is None:
        return None
    named = contract.get("coder")
    entries = named if isinstance(named, list) else [named]
    parts: list[str] = []
    for entry in entries:
        if isinstance(entry, str):
            parts.append(f"kind={entry}")
        elif isinstance(entry, dict):
            for key in ("kind", "model"):
                value = entry.get(key)
                if isinstance(value, str) and value:
                    parts.append(f"{key}={value}")
    if not parts:
        return None
    # Lower-cased, so a filter matches any case with a plain LIKE (ILIKE reads 4x slower).
    kept = (p.lower().replace(CODERS_SEPARATOR, "/") + CODERS_SEPARATOR for p in parts)
    return CODERS_SEPARATOR + "".join(kept)


def _cost_values(task_id: sa.ColumnElement[Any]) -> dict[str, Any]:
    """The task's known cost, and how many of its dispatches have an unknown one (it reported
    no usage, no cost, or its newest report came without one), from each dispatch's totals,
    as :class:`assay.core.usage.Spend` counts them."""
    t = dispatch_totals
    known = sa.and_(t.c.reported, t.c.cost_usd.is_not(None), t.c.priced)
    mine = t.c.task_id == task_id
    return {
        "cost_usd": sa.select(sa.func.coalesce(sa.func.sum(t.c.cost_usd), 0.0))
        .where(mine)
        .scalar_subquery(),
        "cost_unknown": sa.select(sa.func.coalesce(sa.func.sum(sa.case((known, 0), else_=1)), 0))
        .where(mine)
        .scalar_subquery(),
    }


def seconds_between(start: Any, end: Any, dialect: str) -> sa.ColumnElement[float]:
    if dialect == "postgresql":
        return sa.cast(sa.extract("epoch", end - start), sa.Float)
    # julianday's days are exact to about a millisecond: rounded there.
    return sa.func.round((sa.func.julianday(end) - sa.func.julianday(start)) * 86400.0, 3)


def _seconds_value(task_id: sa.ColumnElement[Any], dialect: str) -> Any:
    took = seconds_between(runs.c.started_at, runs.c.finished_at, dialect)
    return (
        sa.select(sa.func.coalesce(sa.func.sum(took), 0.0))
        .where(runs.c.task_id == task_id, runs.c.finished_at.is_not(None))
        .scalar_subquery()
    )


def refresh_cost(conn: sa.Connection, task_id: str) -> None:
    """After a usage row of ``task_id`` is journaled (and its dispatch's totals written)."""
    conn.execute(
        sa.update(tasks).where(tasks.c.id == task_id).values(**_cost_values(sa.literal(task_id)))
    )


def _attempts_value(task_id: sa.ColumnElement[Any]) -> Any:
    return (
        sa.select(sa.func.coalesce(sa.func.max(stage_records.c.attempts), 0))
        .where(stage_records.c.task_id == task_id, stage_records.c.stage == "task")
        .scalar_subquery()
    )


def refresh_attempts(conn: sa.Connection, task_id: str) -> None:
    """After the ``task`` stage record of ``task_id`` is written."""
    value = _attempts_value(sa.literal(task_id))
    conn.execute(sa.update(tasks).where(tasks.c.id == task_id).values(sort_attempts=value))


def refresh_after_close(conn: sa.Connection, task_id: str) -> None:
    """After a run of ``task_id`` is closed: its time, and its attempts (the close set them),
    in one statement."""
    key = sa.literal(task_id)
    conn.execute(
        sa.update(tasks)
        .where(tasks.c.id == task_id)
        .values(
            run_seconds=_seconds_value(key, conn.dialect.name), sort_attempts=_attempts_value(key)
        )
    )
