"""The usage journal: one row per increase of spending a program reported, and its sums.

A row and its ``usage.reported`` event are written in one transaction, the moment the report
arrives, so a run killed at any point still accounts for what its dispatches spent. A
dispatch's figures are the sum of its rows; its cost is known when its newest row is priced.
Each row is summed into its dispatch's totals in the same transaction, which every read of
what dispatches spent reads instead of the rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from assay.adapters.store import dispatch_totals
from assay.adapters.store import statements as st
from assay.adapters.store.schema import dispatch_totals as totals_table
from assay.adapters.store.schema import usage
from assay.core.usage import Spend, UsageFigures
from assay.core.vocab import EventKind, UsageRole

__all__ = ["DispatchKey", "DispatchUsage", "dispatch_usage", "insert_usage", "spend_of"]


@dataclass(frozen=True)
class DispatchKey:
    """Which dispatch spent: its run, its key in the run (``a1.s2``, ``a1.judges.j1``), its
    attempt and seat where it has them, who spent and with what program."""

    task_id: str
    run_id: str
    dispatch: str
    role: UsageRole
    source: str  # the coder's kind, or the judge's name
    attempt: int | None = None
    seat: int | None = None


@dataclass(frozen=True)
class DispatchUsage:
    key: DispatchKey
    figures: UsageFigures
    first_at: datetime | None = None  # when it first reported (the journal's oldest row)


def insert_usage(
    conn: sa.Connection, at: datetime, key: DispatchKey, increase: UsageFigures, priced: bool
) -> int:
    """Journal one increase of ``key``'s spending (its row, its dispatch's totals and its
    event); returns the row id."""
    values: dict[str, Any] = {
        "at": at,
        "task_id": key.task_id,
        "run_id": key.run_id,
        "dispatch": key.dispatch,
        "attempt": key.attempt,
        "seat": key.seat,
        "role": key.role.value,
        "source": key.source,
        "model": increase.model,
        "tokens_in": increase.tokens_in,
        "tokens_out": increase.tokens_out,
        "cost_usd": increase.cost_usd,
        "priced": priced,
        "reported": increase.reported,
    }
    inserted = conn.execute(sa.insert(usage).values(**values)).inserted_primary_key
    row_id = int(inserted[0]) if inserted is not None else 0
    dispatch_totals.upsert(conn, row_id, at, values)
    # The event says the same, without what its row already places it by.
    data = {k: v for k, v in values.items() if k not in ("at", "task_id", "run_id")}
    st.append_event(conn, at, EventKind.USAGE_REPORTED, data, key.task_id, key.run_id)
    return row_id


def dispatch_usage(
    conn: sa.Connection,
    *,
    task_id: str | None = None,
    run_id: str | None = None,
    since: datetime | None = None,
) -> list[DispatchUsage]:
    """Each dispatch's running total (in the order each first reported), of one task, one run
    or every dispatch that reported since ``since``: read from its row of totals, one per
    dispatch (:mod:`.dispatch_totals`), not folded from the journal."""
    t = totals_table
    query = sa.select(t).order_by(t.c.first_id)
    if task_id is not None:
        query = query.where(t.c.task_id == task_id)
    if run_id is not None:
        query = query.where(t.c.run_id == run_id)
    if since is not None:
        query = query.where(t.c.last_at >= since)
    return [_dispatch(row._asdict()) for row in conn.execute(query)]


def _dispatch(row: dict[str, Any]) -> DispatchUsage:
    cost = None if row["cost_usd"] is None else round(float(row["cost_usd"]), 9)
    figures = UsageFigures(
        tokens_in=int(row["tokens_in"]),
        tokens_out=int(row["tokens_out"]),
        cost_usd=cost,
        model=row["model"],
        calls=0,
        reported=bool(row["reported"]),
        # Known in part: some of it came without a cost (its newest report says).
        unpriced=not row["priced"] and cost is not None,
    )
    return DispatchUsage(_key(row), figures, row["first_at"])


def spend_of(dispatches: Iterable[DispatchUsage], *, exclude_run: str | None = None) -> Spend:
    return Spend.of(d.figures for d in dispatches if d.key.run_id != exclude_run)


def _key(row: dict[str, Any]) -> DispatchKey:
    return DispatchKey(
        task_id=str(row["task_id"]),
        run_id=str(row["run_id"]),
        dispatch=str(row["dispatch"]),
        role=UsageRole(str(row["role"])),
        source=str(row["source"]),
        attempt=row["attempt"],
        seat=row["seat"],
    )
