"""Each dispatch's usage (its row of totals, :mod:`.dispatch_totals`) summed per task, coder,
model or day: what ``assay usage`` and the dashboard's usage page both read; and the runs per
day and per coder, by what they cost their task in attempts, for the page.

A range keeps the dispatches that first reported in it, each whole, on the UTC date of its
first report: the page and ``assay usage --since`` count the same dispatches the same way. A
dispatch's cost is known when its newest report was priced and some cost came; an unknown one
is counted apart (unpriced: tokens without a whole cost; unreported: no usage at all), never
added as zero. The database sums one row per dispatch in the range, so a caller gets a row per
group.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import sqlalchemy as sa

from assay.adapters.store.schema import dispatch_totals, runs
from assay.core.usage import Spend
from assay.core.usage_report import Charge, UsageCell, UsageKey
from assay.core.vocab import UsageRole

__all__ = ["coder_runs", "day_start", "run_days", "usage_cells"]


def day_start(day: date) -> datetime:
    """Midnight UTC of ``day``."""
    return datetime.combine(day, time(), tzinfo=UTC)


def _utc_day(conn: sa.Connection, column: Any) -> Any:
    """The UTC date of a time column, as ``YYYY-MM-DD`` text."""
    if conn.dialect.name == "postgresql":
        return sa.func.to_char(sa.func.timezone(_text("UTC"), column), _text("YYYY-MM-DD"))
    # SQLite keeps a naive UTC time as ISO text.
    return sa.func.substr(column, sa.literal_column("1"), sa.literal_column("10"))


def _text(constant: str) -> Any:
    """A constant of ours written into the SQL rather than bound: PostgreSQL matches a
    grouped expression to the selected one only when their parameters are the same text."""
    assert "'" not in constant
    return sa.literal_column(f"'{constant}'")


def _coder(role: Any, source: Any) -> Any:
    """A coder's kind; ``judge:NAME``, ``validator:NAME`` for the others."""
    return sa.case(
        (role == _text(UsageRole.CODER), source),
        else_=role.concat(_text(":")).concat(source),
    )


def _charge(spent: Any) -> Any:
    return sa.case(
        (spent.is_(True), _text(Charge.SPENT)),
        (spent.is_(False), _text(Charge.REFUNDED)),
        else_=_text(Charge.OPEN),
    )


def _count_sum(dialect: str, column: Any) -> Any:
    """A sum of token counts that cannot overflow: SQLite's ``sum()`` of integers fails past
    2**63 (a program may report any count; two dispatches at the bound pass it), its
    ``total()`` is a float, exact to 2**53 tokens; PostgreSQL sums bigints as numeric."""
    return sa.func.total(column) if dialect == "sqlite" else sa.func.sum(column)


def usage_cells(
    conn: sa.Connection,
    keys: Sequence[UsageKey],
    *,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[UsageCell]:
    """The dispatches that first reported in ``since``..``until`` (``until`` excluded; None: no
    bound), each whole, summed per combination of ``keys`` (none: one cell of everything, or
    no cell when nothing is journaled), in the order each cell's dispatches first reported."""
    dialect = conn.dialect.name
    d = dispatch_totals
    # Priced: its newest report says its whole cost is known, and some cost came.
    priced = sa.and_(d.c.reported, d.c.cost_usd.is_not(None), d.c.priced)
    expressions: dict[UsageKey, Callable[[], Any]] = {
        UsageKey.TASK: lambda: d.c.task_id,
        UsageKey.CODER: lambda: _coder(d.c.role, d.c.source),
        UsageKey.MODEL: lambda: d.c.model,
        UsageKey.DAY: lambda: _utc_day(conn, d.c.first_at),
    }
    chosen = [expressions[k]().label(f"k{n}") for n, k in enumerate(keys)]
    query = (
        sa.select(
            *chosen,
            sa.func.count(sa.distinct(d.c.run_id)).label("runs"),
            sa.func.coalesce(_count_sum(dialect, d.c.tokens_in), 0).label("tokens_in"),
            sa.func.coalesce(_count_sum(dialect, d.c.tokens_out), 0).label("tokens_out"),
            sa.func.coalesce(sa.func.sum(d.c.cost_usd), 0.0).label("cost"),
            sa.func.count().label("dispatches"),
            sa.func.sum(sa.case((sa.and_(d.c.reported, sa.not_(priced)), 1), else_=0)).label(
                "unpriced"
            ),
            sa.func.sum(sa.case((d.c.reported, 0), else_=1)).label("unreported"),
            sa.func.min(d.c.first_id).label("first"),
        )
        .where(*_first_in(since, until))
        .group_by(*chosen)
        .order_by(sa.func.min(d.c.first_id))
    )
    cells = []
    for row in conn.execute(query):
        if not row.dispatches:
            continue  # no key: the one row of an empty journal
        spend = Spend(
            tokens_in=int(row.tokens_in),
            tokens_out=int(row.tokens_out),
            priced_cost_usd=round(float(row.cost), 9),
            dispatches=int(row.dispatches),
            unpriced=int(row.unpriced or 0),
            unreported=int(row.unreported or 0),
        )
        values = tuple(None if v is None else str(v) for v in row[: len(keys)])
        cells.append(UsageCell(values, int(row.runs), spend, int(row.first)))
    return cells


def _first_in(since: datetime | None, until: datetime | None) -> list[Any]:
    """The dispatches that first reported in the range."""
    found = []
    if since is not None:
        found.append(dispatch_totals.c.first_at >= since)
    if until is not None:
        found.append(dispatch_totals.c.first_at < until)
    return found


def coder_runs(
    conn: sa.Connection, since: datetime, until: datetime
) -> dict[tuple[str, Charge], int]:
    """The runs of each coder's dispatches that first reported in ``since``..``until``
    (``until`` excluded), counted by what they cost their task in attempts: the runs of
    :func:`usage_cells`' coder groups."""
    d = dispatch_totals
    coder = _coder(d.c.role, d.c.source).label("coder")
    charge = _charge(runs.c.attempt_spent).label("charge")
    query = (
        sa.select(coder, charge, sa.func.count(sa.distinct(d.c.run_id)).label("runs"))
        .select_from(d.join(runs, runs.c.id == d.c.run_id))
        .where(*_first_in(since, until))
        .group_by(coder, charge)
    )
    return {(str(r.coder), Charge(r.charge)): int(r.runs) for r in conn.execute(query)}


def run_days(conn: sa.Connection, since: date, until: date) -> dict[tuple[str, Charge], int]:
    """The runs that started on each UTC day of ``since``..``until`` (both included), counted
    by what they cost their task in attempts."""
    day = _utc_day(conn, runs.c.started_at).label("day")
    charge = _charge(runs.c.attempt_spent).label("charge")
    query = (
        sa.select(day, charge, sa.func.count().label("runs"))
        .where(runs.c.started_at >= day_start(since))
        .where(runs.c.started_at < day_start(until + timedelta(days=1)))
        .group_by(day, charge)
    )
    return {(str(r.day), Charge(r.charge)): int(r.runs) for r in conn.execute(query)}
