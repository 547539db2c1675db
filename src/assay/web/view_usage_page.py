"""The usage page's read model: cost, tokens, runs and attempts per UTC day and per coder, as
charts with their figures, and as JSON for scripts.

The spending is what ``assay usage`` sums (:func:`assay.adapters.store.usage_sums.usage_cells`),
of the dispatches that first reported in the range, each whole (what it reported after the
range too), on the day of its first report; the runs are those that started in the range,
counted by what they cost their task in attempts (spent, refunded, or open while they run).
A cost nobody reported is never $0: a day's cost bar is its known part, marked, with the
count of dispatches without a cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from assay.adapters.store.sql import Ledger
from assay.adapters.store.usage_sums import coder_runs, day_start, run_days, usage_cells
from assay.core.usage import Spend
from assay.core.usage_report import (
    Charge,
    DayUsage,
    UsageKey,
    UsageOverTime,
    over_time,
    spend_json,
)
from assay.web import format as fmt
from assay.web.svg_chart import Bar, Chart, render
from assay.web.usage_query import UsageQuery

__all__ = ["ChartView", "UsagePage", "as_json", "usage_page"]

CHARGES = (Charge.SPENT, Charge.REFUNDED, Charge.OPEN)
RUN_SERIES = ("attempt spent", "refunded", "open")


@dataclass(frozen=True)
class ChartView:
    """A chart and its figures: ``rows`` of text cells under ``headers`` (the first cell a
    label: a day or a coder's name, shown as untrusted text)."""

    ident: str
    title: str
    svg: Any  # markupsafe.Markup
    headers: tuple[str, ...]
    rows: list[tuple[str, ...]]


@dataclass(frozen=True)
class UsagePage:
    query: UsageQuery
    usage: UsageOverTime
    day_charts: list[ChartView]
    coder_charts: list[ChartView]


def read(ledger: Ledger, query: UsageQuery) -> UsageOverTime:
    """The range's figures, in one read transaction."""
    since, until = day_start(query.since), day_start(query.until) + timedelta(days=1)
    with ledger.read() as conn:
        keys = [UsageKey.DAY, UsageKey.CODER]
        cells = usage_cells(conn, keys, since=since, until=until)
        reported_in = coder_runs(conn, since, until)
        started = run_days(conn, query.since, query.until)
    return over_time(query.dates, cells, reported_in, started)


def usage_page(ledger: Ledger, query: UsageQuery) -> UsagePage:
    usage = read(ledger, query)
    return UsagePage(query, usage, _day_charts(usage.days), _coder_charts(usage.coders))


def unknown(spend: Spend) -> int:
    """The dispatches whose cost is not known (no cost reported, or no usage at all)."""
    return spend.unpriced + spend.unreported


def cost_note(label: str, spend: Spend) -> str:
    """A bar's hover: its cost, and why it is only a lower bound."""
    said = fmt.unknown_costs(spend)
    return f"{label}: {fmt.spend_cost(spend)}" + (f" ({said})" if said else "")


def _cost_row(label: str, spend: Spend) -> tuple[str, ...]:
    return (label, fmt.spend_cost(spend), str(unknown(spend)), str(spend.dispatches))


def _token_row(label: str, spend: Spend) -> tuple[str, ...]:
    return (label, f"{spend.tokens_in:,}", f"{spend.tokens_out:,}", f"{spend.tokens:,}")


def _run_row(label: str, day: DayUsage) -> tuple[str, ...]:
    return (label, *(str(day.charged(c)) for c in CHARGES), str(day.run_count))


def _money_axis(value: float) -> str:
    return fmt.usd(value)


def _tokens_axis(value: float) -> str:
    return fmt.tokens(round(value))


def _count_axis(value: float) -> str:
    return f"{value:,.0f}" if value == round(value) else f"{value:,.1f}"


COST_HEADERS = ("", "cost", "dispatches without a known cost", "dispatches")
TOKEN_HEADERS = ("", "tokens in", "tokens out", "tokens")
RUN_HEADERS = ("", *RUN_SERIES, "runs")


def _charts(
    prefix: str, entries: list[DayUsage], labels: list[str], horizontal: bool
) -> list[ChartView]:
    of = "per day (UTC)" if not horizontal else "per coder"
    cost = Chart(
        f"Cost {of}: the known part; a marked bar has dispatches without a known cost",
        ("known cost",),
        [
            Bar(label, (e.spend.priced_cost_usd,), unknown(e.spend), cost_note(e.key, e.spend))
            for label, e in zip(labels, entries, strict=True)
        ],
        _money_axis,
        horizontal,
    )
    tokens = Chart(
        f"Tokens {of}",
        ("in", "out"),
        [
            Bar(label, (float(e.spend.tokens_in), float(e.spend.tokens_out)))
            for label, e in zip(labels, entries, strict=True)
        ],
        _tokens_axis,
        horizontal,
    )
    started = "started" if not horizontal else "its dispatches first reported in"
    runs = Chart(
        f"Runs {of} ({started}), by what they cost in attempts",
        RUN_SERIES,
        [
            Bar(label, tuple(float(e.charged(c)) for c in CHARGES))
            for label, e in zip(labels, entries, strict=True)
        ],
        _count_axis,
        horizontal,
    )
    keys = [e.key for e in entries]
    return [
        ChartView(
            f"{prefix}-cost",
            cost.title,
            render(cost, f"{prefix}-cost"),
            COST_HEADERS,
            [_cost_row(k, e.spend) for k, e in zip(keys, entries, strict=True)],
        ),
        ChartView(
            f"{prefix}-tokens",
            tokens.title,
            render(tokens, f"{prefix}-tokens"),
            TOKEN_HEADERS,
            [_token_row(k, e.spend) for k, e in zip(keys, entries, strict=True)],
        ),
        ChartView(
            f"{prefix}-runs",
            runs.title,
            render(runs, f"{prefix}-runs"),
            RUN_HEADERS,
            [_run_row(k, e) for k, e in zip(keys, entries, strict=True)],
        ),
    ]


def _day_charts(days: list[DayUsage]) -> list[ChartView]:
    return _charts("day", days, [d.key[5:] for d in days], horizontal=False)


def _coder_charts(coders: list[DayUsage]) -> list[ChartView]:
    return _charts("coder", coders, [c.key for c in coders], horizontal=True)


# -- JSON ------------------------------------------------------------------------------------


def _runs_json(entry: DayUsage) -> dict[str, int]:
    return {
        "runs": entry.run_count,
        "attempts_spent": entry.charged(Charge.SPENT),
        "attempts_refunded": entry.charged(Charge.REFUNDED),
        "runs_open": entry.charged(Charge.OPEN),
    }


def as_json(query: UsageQuery, usage: UsageOverTime) -> dict[str, Any]:
    """The page as a document: each day and each coder with its spending and runs, and the
    total."""
    return {
        "since": query.since.isoformat(),
        "until": query.until.isoformat(),
        "days": [{"day": d.key, **_runs_json(d), **spend_json(d.spend)} for d in usage.days],
        "coders": [{"coder": c.key, **_runs_json(c), **spend_json(c.spend)} for c in usage.coders],
        "total": {**_runs_json(usage.total), **spend_json(usage.total.spend)},
    }
