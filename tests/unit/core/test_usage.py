"""Usage figures and budgets (pure): a cost known in part stays a lower bound, increases never
take anything back, and a budget is spent once spending reaches it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from assay.core.usage import (
    FIRST_CALL,
    MAX_COUNT,
    BudgetLimits,
    Spend,
    UsageFigures,
    exhaustion,
    with_call,
)

answers = st.lists(
    st.tuples(
        st.integers(0, 10_000),
        st.integers(0, 10_000),
        st.one_of(st.none(), st.floats(0, 5, allow_nan=False)),
    ),
    max_size=30,
)


@given(answers)
def test_a_loops_cost_is_known_only_when_every_answer_had_one(
    calls: list[tuple[int, int, float | None]],
) -> None:
    figures = FIRST_CALL
    for tokens_in, tokens_out, cost in calls:
        figures = with_call(
            figures, tokens_in=tokens_in, tokens_out=tokens_out, cost_usd=cost, model="m"
        )
    known = [c for _, _, c in calls if c is not None]
    assert figures.tokens == sum(i + o for i, o, _ in calls)
    assert figures.priced == (bool(calls) and len(known) == len(calls))
    assert abs(figures.known_cost - sum(known)) < 1e-6  # the known part always counts
    assert figures.calls == len(calls)


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1, max_size=20))
def test_increases_sum_to_the_largest_total_and_are_never_negative(
    totals: list[tuple[int, int]],
) -> None:
    journaled = UsageFigures(reported=False)
    added = 0
    for tokens_in, tokens_out in totals:
        report = UsageFigures(tokens_in=tokens_in, tokens_out=tokens_out)
        merged = report.at_least(journaled) if journaled.reported else report
        increase = merged.increase(journaled if journaled.reported else UsageFigures())
        assert increase.tokens_in >= 0 and increase.tokens_out >= 0
        added += increase.tokens
        journaled = merged
    assert added == max(i for i, _ in totals) + max(o for _, o in totals)


def test_one_unpriced_answer_makes_the_sum_a_lower_bound() -> None:
    priced = with_call(FIRST_CALL, tokens_in=10, tokens_out=1, cost_usd=0.01, model="m")
    mixed = with_call(priced, tokens_in=10, tokens_out=1, cost_usd=None, model="m")
    mixed = with_call(mixed, tokens_in=10, tokens_out=1, cost_usd=0.02, model="m")
    assert (mixed.priced, mixed.known_cost) == (False, 0.03)
    spend = Spend.of([mixed, priced, UsageFigures(reported=False)])
    assert spend.cost_usd is None and spend.priced_cost_usd == 0.04
    assert (spend.unpriced, spend.unreported, spend.dispatches) == (1, 1, 3)


def test_a_budget_is_spent_once_reached_by_the_run_or_the_task_across_runs() -> None:
    limits = BudgetLimits(run_tokens=100, task_cost_usd=1.0)
    run = Spend(tokens_in=99)
    assert exhaustion(limits, run, Spend()) is None
    reached = exhaustion(limits, Spend(tokens_in=100), Spend())
    assert reached is not None and reached.budget == "budgets.max_tokens"
    earlier = Spend(priced_cost_usd=0.9)
    spent = exhaustion(limits, Spend(tokens_in=1, priced_cost_usd=0.1), earlier)
    assert spent is not None and spent.budget == "budgets.task_max_cost_usd"
    assert "across its runs" in spent.evidence and "$1 of its $1 budget" in spent.evidence
    assert limits.remaining_tokens(run, Spend()) == 1
    assert limits.remaining_cost_usd(Spend(priced_cost_usd=0.25), earlier) == 0.0


def test_costs_whose_sum_passes_any_float_leave_the_cost_known_in_part() -> None:
    spent = with_call(FIRST_CALL, tokens_in=1, tokens_out=1, cost_usd=1.7e308, model=None)
    spent = with_call(spent, tokens_in=1, tokens_out=1, cost_usd=1.7e308, model=None)
    assert (spent.cost_usd, spent.priced, spent.calls, spent.tokens) == (1.7e308, False, 2, 4)


def test_bounded_caps_each_count_so_in_and_out_fit_a_64_bit_column() -> None:
    huge = UsageFigures(tokens_in=10**30, tokens_out=10**30, calls=10**30).bounded()
    assert huge.tokens_in == huge.tokens_out == huge.calls == MAX_COUNT
    assert huge.tokens < 2**63
    small = UsageFigures(tokens_in=5, tokens_out=7)
    assert small.bounded() is small


def test_answers_without_token_counts_are_unknown_never_zero() -> None:
    never = FIRST_CALL
    for _ in range(3):
        never = with_call(never, tokens_in=0, tokens_out=0, cost_usd=None, model="m", counted=False)
    assert (never.reported, never.calls) == (False, 3)  # unknown, not "0 tokens"
    assert Spend.of([never]).unreported == 1
    some = with_call(FIRST_CALL, tokens_in=5, tokens_out=1, cost_usd=0.01, model="m")
    some = with_call(some, tokens_in=0, tokens_out=0, cost_usd=None, model="m", counted=False)
    assert some.reported and not some.priced  # its counts are a lower bound
