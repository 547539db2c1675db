"""The usage journal's rows folded per dispatch in Python, as the ledger read them before it
kept each dispatch's totals: what those totals are checked against."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from assay.adapters.store.schema import usage
from assay.adapters.store.usage_log import DispatchKey, DispatchUsage
from assay.core.usage import UsageFigures
from assay.core.vocab import UsageRole


def journal_fold(conn: sa.Connection) -> list[DispatchUsage]:
    """Every dispatch of the journal, folded from its rows."""
    return fold(r._asdict() for r in conn.execute(sa.select(usage).order_by(usage.c.id)))


def fold(rows: Iterable[dict[str, Any]]) -> list[DispatchUsage]:
    """Rows (oldest first) summed per dispatch: tokens and known cost added up, the cost
    unknown in part when the newest row was not priced, reported when any row was, the model
    the newest one named, first reported at the oldest row's time."""
    totals: dict[tuple[str, str], DispatchUsage] = {}
    for row in rows:
        ident = (str(row["run_id"]), str(row["dispatch"]))
        before = totals.get(ident)
        cost = before.figures.cost_usd if before is not None else None
        if row["cost_usd"] is not None:
            cost = round((cost or 0.0) + float(row["cost_usd"]), 9)
        figures = UsageFigures(
            tokens_in=int(row["tokens_in"]) + (before.figures.tokens_in if before else 0),
            tokens_out=int(row["tokens_out"]) + (before.figures.tokens_out if before else 0),
            cost_usd=cost,
            model=row["model"] or (before.figures.model if before else None),
            calls=0,
            reported=bool(row["reported"]) or (before.figures.reported if before else False),
            unpriced=not row["priced"] and cost is not None,
        )
        if before is not None:
            totals[ident] = DispatchUsage(before.key, figures, before.first_at)
        else:
            key = DispatchKey(
                task_id=str(row["task_id"]),
                run_id=str(row["run_id"]),
                dispatch=str(row["dispatch"]),
                role=UsageRole(str(row["role"])),
                source=str(row["source"]),
                attempt=row["attempt"],
                seat=row["seat"],
            )
            totals[ident] = DispatchUsage(key, figures, row.get("at"))
    return list(totals.values())
