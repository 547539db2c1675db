"""Each dispatch's usage summed on one row, written with each of its usage rows.

A dispatch's figures are the sum of its journal's rows (:mod:`.usage_log`); reading them by
folding the rows costs a read of every report. So the transaction that journals a row also
upserts its dispatch's row in ``dispatch_totals``: its tokens and known cost added, its
reports counted, its first and newest report's time and id, whether the newest was priced
(its whole cost known) and whether any reported usage. Each column is a sum, a min or a max,
or follows the newest row by id, so two reports upserted out of order still say what their
rows say. Revision 0012 fills it from the rows journaled before it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from assay.adapters.store.schema import dispatch_totals

__all__ = ["BIGINT_MAX", "upsert"]

BIGINT_MAX = 2**63 - 1
"""A dispatch's token counts stop here (its 64-bit columns' most) rather than fail its report:
no real dispatch comes near it (each report is counted at most ``MAX_COUNT``)."""


def upsert(conn: sa.Connection, row_id: int, at: datetime, values: dict[str, Any]) -> None:
    """Add the usage row ``row_id`` (journaled at ``at``, with the usage table's ``values``) to
    its dispatch's totals."""
    t = dispatch_totals
    row = {
        "run_id": values["run_id"],
        "dispatch": values["dispatch"],
        "task_id": values["task_id"],
        "attempt": values["attempt"],
        "seat": values["seat"],
        "role": values["role"],
        "source": values["source"],
        "model": values["model"],
        "tokens_in": values["tokens_in"],
        "tokens_out": values["tokens_out"],
        "cost_usd": values["cost_usd"],
        "reports": 1,
        "first_at": at,
        "last_at": at,
        "first_id": row_id,
        "last_id": row_id,
        "priced": values["priced"],
        "reported": values["reported"],
    }
    insert = (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(t)
    new = insert.excluded
    newer = new.last_id > t.c.last_id
    changes = {
        "tokens_in": _saturating_sum(t.c.tokens_in, new.tokens_in),
        "tokens_out": _saturating_sum(t.c.tokens_out, new.tokens_out),
        "cost_usd": sa.case(
            (new.cost_usd.is_(None), t.c.cost_usd),
            else_=sa.func.coalesce(t.c.cost_usd, 0.0) + new.cost_usd,
        ),
        "reports": t.c.reports + 1,
        "first_at": sa.case((new.first_at < t.c.first_at, new.first_at), else_=t.c.first_at),
        "last_at": sa.case((new.last_at > t.c.last_at, new.last_at), else_=t.c.last_at),
        "first_id": sa.case((new.first_id < t.c.first_id, new.first_id), else_=t.c.first_id),
        "last_id": sa.case((newer, new.last_id), else_=t.c.last_id),
        "priced": sa.case((newer, new.priced), else_=t.c.priced),
        "model": sa.case(
            (newer, sa.func.coalesce(new.model, t.c.model)),
            else_=sa.func.coalesce(t.c.model, new.model),
        ),
        "reported": sa.or_(t.c.reported, new.reported),
    }
    statement = insert.values(**row).on_conflict_do_update(
        index_elements=[t.c.run_id, t.c.dispatch], set_=changes
    )
    conn.execute(statement)


def _saturating_sum(kept: Any, added: Any) -> Any:
    # Compared before adding: PostgreSQL's bigint addition fails past the bound.
    return sa.case((kept > BIGINT_MAX - added, BIGINT_MAX), else_=kept + added)
