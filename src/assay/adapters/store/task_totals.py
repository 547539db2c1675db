"""What the queue filters and sorts tasks by, kept on each task's row: the coders its contract
names, what its dispatches cost and how long its runs took.

Each is written in the transaction that changes what it is made of (the contract stored at
``add_task``/``adopt_contract``, a usage row journaled, a run closed), recomputed from those
rows (never incremented), so it is what summing them would say: the known cost is the sum of
:func:`.usage_log.spend_of`'s ``priced_cost_usd``, ``cost_unknown`` its ``unpriced +
unreported``; ``run_seconds`` the sum over the task's closed runs of finished minus started.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from assay.adapters.store.schema import runs, tasks, usage

CODERS_SEPARATOR = "|"


def coders_text(contract: Mapping[str, Any] | None) -> str | None:
    """The coders a stored contract names, as ``|kind=claude|model=opus-4|kind=llm|`` (each
    entry closed by ``|``, so a filter matches a whole kind or a model's start); None when it
    names none (no contract, or the default coder left unset)."""
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
    return CODERS_SEPARATOR + "".join(p.replace(CODERS_SEPARATOR, "/") + "|" for p in parts)


def _dispatches(task_id: sa.ColumnElement[Any]) -> sa.Subquery:
    """The task's dispatches: each one's known cost, and 1 where its cost is unknown (it
    reported no usage, no cost, or its newest row came without one), as
    :func:`.usage_log.fold` and :class:`assay.core.usage.Spend` count them."""
    grouped = (
        sa.select(
            sa.func.max(usage.c.id).label("newest"),
            sa.func.max(sa.case((usage.c.reported, 1), else_=0)).label("reported"),
            sa.func.count(usage.c.cost_usd).label("costs"),
            sa.func.coalesce(sa.func.sum(usage.c.cost_usd), 0.0).label("known"),
        )
        .where(usage.c.task_id == task_id)
        .group_by(usage.c.run_id, usage.c.dispatch)
        .subquery()
    )
    newest = usage.alias("newest")
    priced = sa.and_(grouped.c.reported == 1, grouped.c.costs > 0, newest.c.priced)
    return (
        sa.select(grouped.c.known, sa.case((priced, 0), else_=1).label("unknown"))
        .select_from(grouped.join(newest, newest.c.id == grouped.c.newest))
        .subquery()
    )


def _cost_values(task_id: sa.ColumnElement[Any]) -> dict[str, Any]:
    spent = _dispatches(task_id)
    return {
        "cost_usd": sa.select(sa.func.coalesce(sa.func.sum(spent.c.known), 0.0)).scalar_subquery(),
        "cost_unknown": sa.select(
            sa.func.coalesce(sa.func.sum(spent.c.unknown), 0)
        ).scalar_subquery(),
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
    """After a usage row of ``task_id`` is journaled."""
    conn.execute(
        sa.update(tasks).where(tasks.c.id == task_id).values(**_cost_values(sa.literal(task_id)))
    )


def refresh_run_seconds(conn: sa.Connection, task_id: str) -> None:
    """After a run of ``task_id`` is closed."""
    value = _seconds_value(sa.literal(task_id), conn.dialect.name)
    conn.execute(sa.update(tasks).where(tasks.c.id == task_id).values(run_seconds=value))
