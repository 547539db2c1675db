"""Spending summed per task, coder, model and day: unknown costs stay unknown and counted."""

from __future__ import annotations

from assay.core.usage import UsageFigures
from assay.core.usage_report import Spent, group_key, summarise
from assay.core.vocab import UsageGrouping, UsageRole

CODER, JUDGE, VALIDATOR = UsageRole.CODER, UsageRole.JUDGE, UsageRole.VALIDATOR


def spent(
    task: str,
    run: str,
    source: str = "claude",
    *,
    role: UsageRole = CODER,
    day: str | None = "2026-12-01",
    tokens: tuple[int, int] = (100, 10),
    cost: float | None = 0.01,
    model: str | None = "sonnet",
    reported: bool = True,
) -> Spent:
    figures = UsageFigures(tokens[0], tokens[1], cost, model, reported=reported)
    return Spent(task, run, role, source, day, figures)


DISPATCHES = [
    spent("t-2", "r-1", tokens=(1000, 100), cost=0.5),
    spent("t-2", "r-1", "llm", tokens=(400, 40), cost=None, model="mini"),  # unpriced
    spent("t-2", "r-1", "j1", role=JUDGE, tokens=(50, 5), cost=0.001, model="haiku"),
    spent("t-1", "r-2", day="2026-11-30", tokens=(300, 30), cost=0.2),
    spent("t-1", "r-3", "aider", tokens=(0, 0), cost=None, model=None, reported=False),
    spent("t-1", "r-3", "v1", role=VALIDATOR, tokens=(10, 1), cost=0.0, model="haiku"),
]


def test_by_task_in_the_order_tasks_first_reported_with_their_runs() -> None:
    summary = summarise(DISPATCHES, UsageGrouping.TASK)
    assert [(g.key, g.runs, g.spend.dispatches) for g in summary.groups] == [
        ("t-2", 1, 3),
        ("t-1", 2, 3),
    ]
    first, second = (g.spend for g in summary.groups)
    assert (first.tokens_in, first.tokens_out, first.tokens) == (1450, 145, 1595)
    # One dispatch unpriced: the cost is unknown, the priced part a lower bound.
    assert first.cost_usd is None and first.priced_cost_usd == 0.501
    assert (first.unpriced, first.unreported) == (1, 0)
    assert second.cost_usd is None and second.priced_cost_usd == 0.2
    assert (second.unpriced, second.unreported) == (0, 1)


def test_the_total_counts_every_dispatch_and_distinct_run() -> None:
    total = summarise(DISPATCHES, UsageGrouping.MODEL).total
    assert total.key is None and total.runs == 3
    assert (total.spend.dispatches, total.spend.tokens) == (6, 1936)
    assert (total.spend.unpriced, total.spend.unreported) == (1, 1)
    assert total.spend.cost_usd is None and total.spend.priced_cost_usd == 0.701


def test_by_coder_keeps_judges_and_validators_apart_heaviest_first() -> None:
    groups = summarise(DISPATCHES, UsageGrouping.CODER).groups
    assert [g.key for g in groups] == ["claude", "llm", "judge:j1", "validator:v1", "aider"]
    claude = groups[0].spend
    assert (claude.dispatches, claude.cost_usd, groups[0].runs) == (2, 0.7, 2)
    aider = groups[-1].spend
    assert aider.cost_usd is None and aider.priced_cost_usd == 0 and aider.unreported == 1
    # A cost reported as 0 is known: 0, not unknown.
    assert groups[3].spend.cost_usd == 0.0


def test_by_model_puts_the_unknown_model_last() -> None:
    groups = summarise(DISPATCHES, UsageGrouping.MODEL).groups
    assert [g.key for g in groups] == ["sonnet", "mini", "haiku", None]
    assert groups[2].spend.dispatches == 2 and groups[2].runs == 2


def test_by_day_in_date_order() -> None:
    dispatches = [*DISPATCHES, spent("t-3", "r-4", day=None)]
    groups = summarise(dispatches, UsageGrouping.DAY).groups
    assert [(g.key, g.spend.dispatches) for g in groups] == [
        ("2026-11-30", 1),
        ("2026-12-01", 5),
        (None, 1),
    ]


def test_nothing_spent_is_a_known_zero() -> None:
    summary = summarise([], UsageGrouping.TASK)
    assert summary.groups == [] and summary.total.runs == 0
    assert summary.total.spend.cost_usd == 0 and summary.total.spend.dispatches == 0


def test_group_keys() -> None:
    judge = spent("t", "r", "j2", role=JUDGE, day="2026-12-02")
    assert group_key(judge, UsageGrouping.TASK) == "t"
    assert group_key(judge, UsageGrouping.CODER) == "judge:j2"
    assert group_key(judge, UsageGrouping.MODEL) == "sonnet"
    assert group_key(judge, UsageGrouping.DAY) == "2026-12-02"
