"""Spending ordered per task, coder, model and day, and laid out over time (pure): unknown
costs stay unknown and counted; a day with nothing is a known zero."""

from __future__ import annotations

from assay.core.usage import Spend
from assay.core.usage_report import Charge, UsageCell, over_time, summary_of
from assay.core.vocab import UsageGrouping


def cell(
    *keys: str | None, runs: int = 1, tokens: int = 100, first: int = 0, **spend: int
) -> UsageCell:
    cost = float(spend.pop("cost", 1))
    return UsageCell(
        keys, runs, Spend(tokens_in=tokens, priced_cost_usd=cost, dispatches=1, **spend), first
    )


def test_tasks_come_in_the_order_they_first_reported() -> None:
    summary = summary_of([cell("t-2", first=7), cell("t-1", first=3)], None, UsageGrouping.TASK)
    assert [g.key for g in summary.groups] == ["t-1", "t-2"]


def test_coders_and_models_heaviest_first_the_unknown_model_last() -> None:
    cells = [cell(None, tokens=10**9), cell("mini", tokens=5), cell("sonnet", tokens=50)]
    summary = summary_of(cells, cell(None, runs=3), UsageGrouping.MODEL)
    assert [g.key for g in summary.groups] == ["sonnet", "mini", None]
    assert summary.total.runs == 3 and summary.total.key is None


def test_days_in_date_order() -> None:
    cells = [cell("2026-12-02", first=1), cell("2026-11-30", first=2)]
    assert [g.key for g in summary_of(cells, None, UsageGrouping.DAY).groups] == [
        "2026-11-30",
        "2026-12-02",
    ]


def test_nothing_journaled_is_a_known_zero() -> None:
    summary = summary_of([], None, UsageGrouping.TASK)
    assert summary.groups == [] and summary.total.runs == 0
    assert summary.total.spend.cost_usd == 0 and summary.total.spend.dispatches == 0


def test_over_time_has_every_day_and_keeps_unknown_costs_apart() -> None:
    cells = [
        cell("2026-12-01", "claude", tokens=300),
        cell("2026-12-01", "llm", tokens=30, unpriced=1),
        cell("2026-12-03", "claude", tokens=50, unreported=1),
    ]
    coder_runs = {
        ("claude", Charge.SPENT): 2,
        ("claude", Charge.REFUNDED): 1,
        ("llm", Charge.OPEN): 1,
    }
    started = {("2026-12-01", Charge.SPENT): 2, ("2026-12-02", Charge.REFUNDED): 1}
    view = over_time(["2026-12-01", "2026-12-02", "2026-12-03"], cells, coder_runs, started)
    assert [d.key for d in view.days] == ["2026-12-01", "2026-12-02", "2026-12-03"]
    first, empty, third = view.days
    assert first.spend.cost_usd is None and first.spend.priced_cost_usd == 2.0
    assert first.spend.tokens == 330 and first.spend.dispatches == 2
    assert empty.spend == Spend() and empty.spend.cost_usd == 0 and empty.run_count == 1
    assert third.spend.cost_usd is None and third.runs == {}
    assert first.runs == {Charge.SPENT: 2}
    assert view.total.spend.priced_cost_usd == 3 and view.total.spend.cost_usd is None
    assert view.total.spend.dispatches == 3
    assert view.total.runs == {Charge.SPENT: 2, Charge.REFUNDED: 1, Charge.OPEN: 0}
    claude, llm = view.coders
    assert claude.key == "claude" and claude.runs == {Charge.SPENT: 2, Charge.REFUNDED: 1}
    assert claude.spend.tokens == 350 and claude.spend.unreported == 1
    assert claude.spend.cost_usd is None and claude.spend.priced_cost_usd == 2
    assert llm.runs == {Charge.OPEN: 1} and llm.run_count == 1 and llm.spend.unpriced == 1


def test_a_coder_with_runs_but_nothing_journaled_in_the_range_is_listed() -> None:
    view = over_time(["2026-12-01"], [], {("claude", Charge.SPENT): 1}, {})
    (claude,) = view.coders
    assert claude.spend == Spend() and claude.runs == {Charge.SPENT: 1}
