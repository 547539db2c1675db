"""Spending summed per task, coder, model or day, and over time per day and per coder (pure).

The store sums the journal per group (:mod:`assay.adapters.store.usage_sums`) into
:class:`UsageCell` values; this module orders them for ``assay usage`` and lays them out day by
day for the dashboard's usage page. A cell sums its dispatches with
:class:`~assay.core.usage.Spend`, so a cost nobody reported stays unknown and is counted apart,
never added as zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from assay.core.usage import Spend
from assay.core.vocab import UsageGrouping

__all__ = [
    "Charge",
    "DayUsage",
    "UsageCell",
    "UsageGroup",
    "UsageKey",
    "UsageOverTime",
    "UsageSummary",
    "over_time",
    "spend_json",
    "summary_of",
]


class UsageKey(StrEnum):
    """What the store can sum the journal per: ``assay usage``'s groupings."""

    TASK = "task"
    CODER = "coder"  # the coder's kind; ``judge:NAME``, ``validator:NAME`` for the others
    MODEL = "model"
    DAY = "day"  # the UTC date of a dispatch's first report


class Charge(StrEnum):
    """What a run cost its task in attempts: one (``spent``), none (``refunded``: a quota, a
    provider fault, an interruption), or not yet known (``open``: still running)."""

    SPENT = "spent"
    REFUNDED = "refunded"
    OPEN = "open"


@dataclass(frozen=True)
class UsageCell:
    """What the dispatches with one combination of keys spent, over how many runs; ``first``
    orders cells as their dispatches first reported (the journal's row id)."""

    keys: tuple[str | None, ...]
    runs: int
    spend: Spend
    first: int = 0


@dataclass(frozen=True)
class UsageGroup:
    """What the dispatches of one group spent, over how many runs. ``key`` is the task id, the
    coder (``judge:NAME``, ``validator:NAME`` for the others), the model or the UTC date;
    None when the dispatches did not say (no model reported)."""

    key: str | None
    runs: int
    spend: Spend


@dataclass(frozen=True)
class UsageSummary:
    groups: list[UsageGroup]
    total: UsageGroup  # every dispatch (its key None)


def summary_of(
    cells: Iterable[UsageCell], total: UsageCell | None, by: UsageGrouping
) -> UsageSummary:
    """``assay usage``'s groups from the cells summed per ``by`` alone: tasks in the order they
    first reported and days by date; coders and models the heaviest first (most tokens), with
    an unknown model last. ``total``: the cell of every dispatch (None: nothing journaled)."""
    found = sorted(cells, key=lambda c: c.first)
    groups = [UsageGroup(c.keys[0], c.runs, c.spend) for c in found]
    if by is UsageGrouping.DAY:
        groups.sort(key=lambda g: (g.key is None, g.key or ""))
    elif by is not UsageGrouping.TASK:
        groups.sort(key=lambda g: (g.key is None, -g.spend.tokens, g.key or ""))
    every = UsageGroup(None, total.runs, total.spend) if total else UsageGroup(None, 0, Spend())
    return UsageSummary(groups, every)


# -- over time: the dashboard's usage page ---------------------------------------------------


@dataclass(frozen=True)
class DayUsage:
    """One UTC day (or one coder): what its dispatches spent and its runs, by :class:`Charge`.
    A day's runs are those that started on it; a coder's, those its dispatches reported in."""

    key: str
    spend: Spend = field(default_factory=Spend)
    runs: dict[Charge, int] = field(default_factory=dict)

    @property
    def run_count(self) -> int:
        return sum(self.runs.values())

    def charged(self, charge: Charge) -> int:
        return self.runs.get(charge, 0)


@dataclass(frozen=True)
class UsageOverTime:
    """The usage page: every day of the range, as ISO dates (a day with nothing is all zeros,
    its cost a known $0), each coder (the heaviest first) and the total."""

    days: list[DayUsage]
    coders: list[DayUsage]
    total: DayUsage


def over_time(
    dates: Sequence[str],
    cells: Sequence[UsageCell],
    coder_runs: dict[tuple[str, Charge], int],
    run_days: dict[tuple[str, Charge], int],
) -> UsageOverTime:
    """Lay out the spending summed per day and coder (cells keyed ``(day, coder)``), the runs
    each coder's dispatches reported in and the runs started per day, each by charge, over
    ``dates`` (every day of the range, ISO, in order)."""
    per_day: dict[str, Spend] = {}
    per_coder: dict[str, Spend] = {}
    for cell in cells:
        day, coder = cell.keys[0] or "", cell.keys[1] or ""
        per_day[day] = per_day.get(day, Spend()).plus(cell.spend)
        per_coder[coder] = per_coder.get(coder, Spend()).plus(cell.spend)
    days = []
    for iso in dates:
        runs = {c: run_days[(iso, c)] for c in Charge if run_days.get((iso, c))}
        days.append(DayUsage(iso, per_day.pop(iso, Spend()), runs))
    named = set(per_coder) | {coder for coder, _ in coder_runs}
    coders = [
        DayUsage(
            name,
            per_coder.get(name, Spend()),
            {c: coder_runs[(name, c)] for c in Charge if coder_runs.get((name, c))},
        )
        for name in named
    ]
    coders.sort(key=lambda c: (-c.spend.tokens, -c.run_count, c.key))
    total_runs = {c: sum(d.charged(c) for d in days) for c in Charge}
    total = DayUsage("total", _sum(c.spend for c in cells), total_runs)
    return UsageOverTime(days, coders, total)


def _sum(spends: Iterable[Spend]) -> Spend:
    total = Spend()
    for spend in spends:
        total = total.plus(spend)
    return total


def spend_json(spend: Spend) -> dict[str, Any]:
    """A sum of dispatches as JSON (``assay usage --json``, the usage page's JSON), named as
    the payload's ``usage`` names them: ``cost_usd`` null when any cost is unknown, and then
    ``priced_cost_usd`` (the sum of the known ones) is a lower bound."""
    return {
        "dispatches": spend.dispatches,
        "tokens_in": spend.tokens_in,
        "tokens_out": spend.tokens_out,
        "tokens": spend.tokens,
        "cost_usd": spend.cost_usd,
        "priced_cost_usd": round(spend.priced_cost_usd, 6),
        "unpriced_dispatches": spend.unpriced,
        "unreported_dispatches": spend.unreported,
    }
