"""Spending summed per task, coder, model or day (pure).

The input is each dispatch's running total as the usage journal folds it; a group sums its
dispatches with :class:`~assay.core.usage.Spend`, so a cost nobody reported stays unknown and
is counted apart, never added as zero.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from assay.core.usage import Spend, UsageFigures
from assay.core.vocab import UsageGrouping, UsageRole

__all__ = ["Spent", "UsageGroup", "UsageSummary", "group_key", "summarise"]


@dataclass(frozen=True)
class Spent:
    """One dispatch's running total with what a report groups it by."""

    task_id: str
    run_id: str
    role: UsageRole
    source: str  # the coder's kind, or the judge's (validator's) name
    day: str | None  # the UTC date (ISO) of its first report
    figures: UsageFigures


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


def group_key(spent: Spent, by: UsageGrouping) -> str | None:
    if by is UsageGrouping.TASK:
        return spent.task_id
    if by is UsageGrouping.CODER:
        return spent.source if spent.role is UsageRole.CODER else f"{spent.role}:{spent.source}"
    if by is UsageGrouping.MODEL:
        return spent.figures.model
    return spent.day


def summarise(dispatches: Iterable[Spent], by: UsageGrouping) -> UsageSummary:
    """The dispatches (in the order they first reported) summed per group. Tasks come in the
    order they first reported and days by date; coders and models the heaviest first (most
    tokens), with an unknown model last."""
    members: dict[str | None, list[Spent]] = {}
    every: list[Spent] = []
    for spent in dispatches:
        members.setdefault(group_key(spent, by), []).append(spent)
        every.append(spent)
    groups = [_group(key, spents) for key, spents in members.items()]
    if by is UsageGrouping.DAY:
        groups.sort(key=lambda g: (g.key is None, g.key or ""))
    elif by is not UsageGrouping.TASK:
        groups.sort(key=lambda g: (g.key is None, -g.spend.tokens, g.key or ""))
    return UsageSummary(groups, _group(None, every))


def _group(key: str | None, spents: list[Spent]) -> UsageGroup:
    runs = len({s.run_id for s in spents})
    return UsageGroup(key, runs, Spend.of(s.figures for s in spents))
