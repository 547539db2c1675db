"""How the commands print what was spent: ``assay usage``'s table and JSON, and the usage lines
of ``task show`` and ``ledger show``.

A cost is printed only when every dispatch summed in it reported one: otherwise the known part
is a lower bound (``≥ $0.42``), or ``unknown`` when nothing was priced, and the dispatches that
were not priced (tokens but no cost) or reported no usage at all are counted beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from assay.cli.table import render, terminal_width
from assay.core.usage import Spend, money
from assay.core.usage_report import UsageGroup, UsageSummary, spend_json
from assay.core.vocab import UsageGrouping

if TYPE_CHECKING:
    from assay.adapters.store.usage_log import DispatchUsage

__all__ = ["TaskUsage", "cost_cell", "spend_json", "spend_line", "summary_json", "summary_text"]

UNKNOWN = "unknown"
NUMBERS = ("runs", "dispatches", "tokens_in", "tokens_out", "tokens", "cost", "unpriced")


def cost_cell(spend: Spend) -> str:
    """``$0.42`` when known; ``≥ $0.42`` when some costs are unknown; ``unknown`` when none
    is known."""
    if spend.cost_usd is not None:
        return money(spend.cost_usd)
    if spend.priced_cost_usd > 0:
        return f"≥ {money(spend.priced_cost_usd)}"
    return UNKNOWN


def unknown_words(spend: Spend, *, explained: bool = False) -> str:
    """The dispatches whose cost is unknown, in words ("" when there are none)."""
    parts = []
    if spend.unpriced:
        said = "reported tokens but no cost" if explained else "unpriced"
        parts.append(f"{spend.unpriced} {said}")
    if spend.unreported:
        parts.append(f"{spend.unreported} reported no usage")
    return ", ".join(parts)


def spend_line(spend: Spend) -> str:
    """One sum in words: tokens, the cost (and why it is only a lower bound), dispatches."""
    dispatches = f"{spend.dispatches} dispatch{'es' if spend.dispatches != 1 else ''}"
    if spend.cost_usd is None:
        dispatches += f" ({unknown_words(spend)})"
    return (
        f"{spend.tokens:,} tokens ({spend.tokens_in:,} in, {spend.tokens_out:,} out), "
        f"cost {cost_cell(spend)}, {dispatches}"
    )


# -- task show, ledger show ------------------------------------------------------------------


@dataclass(frozen=True)
class TaskUsage:
    """A task's journaled spending in all and per run (in the order its runs first reported)."""

    total: Spend
    runs: dict[str, Spend]

    @classmethod
    def of(cls, dispatches: Sequence[DispatchUsage]) -> TaskUsage:
        per_run: dict[str, list[DispatchUsage]] = {}
        for dispatch in dispatches:
            per_run.setdefault(dispatch.key.run_id, []).append(dispatch)
        runs = {run_id: Spend.of(d.figures for d in found) for run_id, found in per_run.items()}
        return cls(Spend.of(d.figures for d in dispatches), runs)

    def as_json(self) -> dict[str, Any]:
        """The ``usage`` of ``task show --json`` and ``ledger show --json``: the total and
        each run that journaled usage."""
        runs = [{"run_id": run_id, **spend_json(spend)} for run_id, spend in self.runs.items()]
        return {"total": spend_json(self.total), "runs": runs}

    def total_line(self) -> str:
        if not self.total.dispatches:
            return "usage: none journaled"
        return f"usage (all runs): {spend_line(self.total)}"

    def run_line(self, run_id: str) -> str | None:
        spend = self.runs.get(run_id)
        return None if spend is None else spend_line(spend)


# -- assay usage -----------------------------------------------------------------------------


def summary_json(
    summary: UsageSummary, by: UsageGrouping, since: str | None, titles: Mapping[str, str]
) -> dict[str, Any]:
    """``assay usage --json``: each group (``title`` the task's, grouped by task) and the total."""

    def group(g: UsageGroup) -> dict[str, Any]:
        title = titles.get(g.key) if by is UsageGrouping.TASK and g.key is not None else None
        return {"key": g.key, "title": title, "runs": g.runs, **spend_json(g.spend)}

    total = {"runs": summary.total.runs, **spend_json(summary.total.spend)}
    groups = [group(g) for g in summary.groups]
    return {"by": by.value, "since": since, "groups": groups, "total": total}


def summary_text(summary: UsageSummary, by: UsageGrouping, titles: Mapping[str, str]) -> str:
    """``assay usage``'s table, its total as the last row, and a note on unknown costs."""
    headers = [by.value, *(["title"] if by is UsageGrouping.TASK else []), *NUMBERS, "unreported"]
    rows = [_row(g, by, titles) for g in summary.groups]
    rows.append(_row(summary.total, by, titles, name="total"))
    shrink = (1,) if by is UsageGrouping.TASK else ()
    text = render(headers, rows, shrink=shrink, width=terminal_width())
    total = summary.total.spend
    if total.cost_usd is None:
        unknown = total.unpriced + total.unreported
        text += (
            f"{unknown} of {total.dispatches} dispatches {'has' if unknown == 1 else 'have'} no "
            f"known cost ({unknown_words(total, explained=True)}): the total is at least "
            f"{money(total.priced_cost_usd)}\n"
        )
    return text


def _row(
    group: UsageGroup, by: UsageGrouping, titles: Mapping[str, str], name: str | None = None
) -> list[str]:
    spend = group.spend
    key = name or group.key or UNKNOWN
    title = [titles.get(group.key or "", "") if name is None else ""]
    return [
        key,
        *(title if by is UsageGrouping.TASK else []),
        str(group.runs),
        str(spend.dispatches),
        f"{spend.tokens_in:,}",
        f"{spend.tokens_out:,}",
        f"{spend.tokens:,}",
        cost_cell(spend),
        str(spend.unpriced),
        str(spend.unreported),
    ]
