"""The usage journal summed in SQL, per task, coder, model or day: what ``assay usage`` and
the dashboard's usage page both read; and the runs per day and per coder, by what they cost
their task in attempts, for the page.

A dispatch's figures are folded as :func:`assay.adapters.store.usage_log.fold` folds them (its
tokens and known cost the sum of its rows; priced when its newest row says so and some cost
came; unreported when no row reported usage; its model the newest one named; its day the UTC
date of its earliest report), then summed per group by the database, so a caller gets a row
per group rather than every report to fold in Python.

A range keeps the dispatches that reported in it, each with all it spent (``assay usage
--since``) or with what it reported in the range (the usage page, which reads only the rows
in its range: a page over a year of a large ledger does not fold the journal's every row).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import sqlalchemy as sa

from assay.adapters.store.schema import runs, usage
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


def _dispatches(
    dialect: str,
    since: datetime | None,
    until: datetime | None,
    whole: bool,
    keys: Sequence[UsageKey],
) -> sa.Subquery:
    """One row per dispatch with its sums, the ids of its first, newest and newest priced
    rows, and what ``keys`` need of it (its task, role and source are the same in each row);
    of the dispatches that reported in the range, with all their rows (``whole``) or with the
    rows in the range only."""
    # Only what the keys read: each aggregate is paid for on every row folded.
    wanted: dict[UsageKey, list[Any]] = {
        UsageKey.TASK: [sa.func.min(usage.c.task_id).label("task_id")],
        UsageKey.CODER: [
            sa.func.min(usage.c.role).label("role"),
            sa.func.min(usage.c.source).label("source"),
        ],
        UsageKey.MODEL: [
            sa.func.max(sa.case((usage.c.model.is_not(None), usage.c.id))).label("model_id")
        ],
        UsageKey.DAY: [sa.func.min(usage.c.at).label("first_at")],
    }
    query = sa.select(
        usage.c.run_id,
        usage.c.dispatch,
        *(column for key in dict.fromkeys(keys) for column in wanted[key]),
        sa.func.min(usage.c.id).label("first_id"),
        sa.func.max(usage.c.id).label("last_id"),
        sa.func.max(sa.case((usage.c.priced.is_(True), usage.c.id))).label("priced_id"),
        _count_sum(dialect, usage.c.tokens_in).label("tokens_in"),
        _count_sum(dialect, usage.c.tokens_out).label("tokens_out"),
        sa.func.sum(usage.c.cost_usd).label("cost"),  # NULL: no row came with a cost
        sa.func.max(sa.case((usage.c.reported.is_(True), 1), else_=0)).label("reported"),
    ).group_by(usage.c.run_id, usage.c.dispatch)
    if not whole:
        if since is not None:
            query = query.where(usage.c.at >= since)
        if until is not None:
            query = query.where(usage.c.at < until)
    elif since is not None or until is not None:
        window = sa.select(usage.c.run_id, usage.c.dispatch)
        if since is not None:
            window = window.where(usage.c.at >= since)
        if until is not None:
            window = window.where(usage.c.at < until)
        query = query.where(sa.tuple_(usage.c.run_id, usage.c.dispatch).in_(window))
    return query.subquery("d")


def usage_cells(
    conn: sa.Connection,
    keys: Sequence[UsageKey],
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    whole: bool = True,
) -> list[UsageCell]:
    """The journal's dispatches that reported in ``since``..``until`` (``until`` excluded;
    None: no bound), summed per combination of ``keys`` (none: one cell of everything, or no
    cell when nothing is journaled), in the order each cell's dispatches first reported.

    ``whole``: each dispatch with all it spent, on the day of its first report (``assay
    usage --since``); else only what it reported in the range, on the day of its first
    report there (the usage page: read from the rows in the range alone, so its cost follows
    the range, not the journal). A dispatch whose cost was unknown as of its newest row in
    the range stays unknown, even when its part in the range came with costs."""
    dialect = conn.dialect.name
    d = _dispatches(dialect, since, until, whole, keys)
    named = usage.alias("named")
    # Priced: its newest row says its whole cost is known, and some cost came.
    priced = sa.and_(d.c.reported == 1, d.c.cost.is_not(None), d.c.priced_id == d.c.last_id)
    expressions: dict[UsageKey, Callable[[], Any]] = {
        UsageKey.TASK: lambda: d.c.task_id,
        UsageKey.CODER: lambda: _coder(d.c.role, d.c.source),
        UsageKey.MODEL: lambda: named.c.model,
        UsageKey.DAY: lambda: _utc_day(conn, d.c.first_at),
    }
    chosen = [expressions[k]().label(f"k{n}") for n, k in enumerate(keys)]
    source: Any = d
    if UsageKey.MODEL in keys:
        source = source.outerjoin(named, named.c.id == d.c.model_id)
    query = (
        sa.select(
            *chosen,
            sa.func.count(sa.distinct(d.c.run_id)).label("runs"),
            sa.func.coalesce(_count_sum(dialect, d.c.tokens_in), 0).label("tokens_in"),
            sa.func.coalesce(_count_sum(dialect, d.c.tokens_out), 0).label("tokens_out"),
            sa.func.coalesce(sa.func.sum(sa.func.coalesce(d.c.cost, 0.0)), 0.0).label("cost"),
            sa.func.count().label("dispatches"),
            sa.func.sum(sa.case((sa.and_(d.c.reported == 1, sa.not_(priced)), 1), else_=0)).label(
                "unpriced"
            ),
            sa.func.sum(sa.case((d.c.reported == 0, 1), else_=0)).label("unreported"),
            sa.func.min(d.c.first_id).label("first"),
        )
        .select_from(source)
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


def coder_runs(
    conn: sa.Connection, since: datetime, until: datetime
) -> dict[tuple[str, Charge], int]:
    """The runs each coder's dispatches reported in, in ``since``..``until`` (``until``
    excluded), counted by what they cost their task in attempts: the runs of
    :func:`usage_cells`' coder groups (a dispatch is there when it reported in the range)."""
    coder = _coder(usage.c.role, usage.c.source).label("coder")
    charge = _charge(runs.c.attempt_spent).label("charge")
    query = (
        sa.select(coder, charge, sa.func.count(sa.distinct(usage.c.run_id)).label("runs"))
        .select_from(usage.join(runs, runs.c.id == usage.c.run_id))
        .where(usage.c.at >= since, usage.c.at < until)
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
