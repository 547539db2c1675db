"""The run meter: every increase journaled once, as reported; budgets checked on each report,
across the task's runs; a dispatch that reported nothing is journaled as unknown."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from assay.adapters.coders.base import DispatchResult
from assay.adapters.store.schema import runs
from assay.adapters.store.sql import Ledger
from assay.core.tasks import Task
from assay.core.usage import MAX_COUNT, BudgetLimits, Spend, UsageFigures, with_call
from assay.core.vocab import BudgetAction, EventKind
from assay.engine.local.metering import RunMeter, coder_key, metered

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger(f"sqlite:///{tmp_path / 'assay.db'}")
    ledger.migrate()
    ledger.add_task(Task.new(id="t1", title="t", instruction="Fix it.", now=NOW))
    return ledger


def _run(ledger: Ledger, run_id: str) -> None:
    """A run row of task t1 (closed or not does not matter to the meter)."""
    with ledger._engine.begin() as conn:
        conn.execute(sa.insert(runs).values(id=run_id, task_id="t1", status="prep", started_at=NOW))


def _meter(ledger: Ledger, run_id: str = "r1", **limits: object) -> RunMeter:
    return RunMeter(
        ledger,
        task_id="t1",
        run_id=run_id,
        limits=BudgetLimits(**limits),  # type: ignore[arg-type]
        clock=lambda: NOW,
    )


def test_each_increase_is_journaled_once_with_its_event(ledger: Ledger) -> None:
    _run(ledger, "r1")
    seat = _meter(ledger).dispatch(coder_key("t1", "r1", 1, 1, "claude"))
    seat.report(UsageFigures(tokens_in=100, tokens_out=10, model="m"))
    seat.report(UsageFigures(tokens_in=100, tokens_out=10, model="m"))  # nothing new
    seat.report(UsageFigures(tokens_in=250, tokens_out=30, model="m"))
    total = seat.finish(UsageFigures(tokens_in=250, tokens_out=30, cost_usd=0.02))
    assert (total.tokens, total.cost_usd) == (280, 0.02)
    [spent] = ledger.usage(run_id="r1")
    assert spent.figures.tokens == 280 and spent.figures.cost_usd == 0.02
    events = [e for e in ledger.events(run_id="r1") if e.kind == EventKind.USAGE_REPORTED]
    assert [(e.data["tokens_in"], e.data["tokens_out"]) for e in events] == [
        (100, 10),
        (150, 20),
        (0, 0),  # the cost became known
    ]


def test_a_dispatch_that_reported_nothing_is_unknown_never_zero(ledger: Ledger) -> None:
    _run(ledger, "r1")
    meter = _meter(ledger)
    result = metered(
        meter.dispatch(coder_key("t1", "r1", 1, 1, "command")), DispatchResult(exit_code=0)
    )
    assert result.tokens_used is None and result.cost_usd is None
    spend = Spend.of(d.figures for d in ledger.usage(run_id="r1"))
    assert (spend.dispatches, spend.unreported, spend.cost_usd) == (1, 1, None)


def test_a_run_budget_stops_every_seat_once_spent(ledger: Ledger) -> None:
    _run(ledger, "r1")
    meter = _meter(ledger, run_tokens=1000)
    one = meter.dispatch(coder_key("t1", "r1", 1, 1, "llm"))
    two = meter.dispatch(coder_key("t1", "r1", 1, 2, "llm"))
    one.report(UsageFigures(tokens_in=600))
    assert one.stop_reason() is None and one.remaining_tokens() == 400
    two.report(UsageFigures(tokens_in=450))
    assert one.stop_reason() == two.stop_reason()
    reason = two.stop_reason()
    assert reason is not None and "1,050 tokens of its 1,000-token budget" in reason


def test_a_task_budget_counts_earlier_runs_refunded_or_not(ledger: Ledger) -> None:
    _run(ledger, "r1")
    first = _meter(ledger, "r1", task_cost_usd=1.0)
    first.dispatch(coder_key("t1", "r1", 1, 1, "claude")).finish(UsageFigures(cost_usd=0.7))
    _run(ledger, "r2")
    second = _meter(ledger, "r2", task_cost_usd=1.0)
    assert second.before.priced_cost_usd == 0.7
    assert second.remaining_cost_usd() == pytest.approx(0.3)
    seat = second.dispatch(coder_key("t1", "r2", 1, 1, "claude"))
    seat.report(UsageFigures(tokens_in=5, cost_usd=0.31))
    assert seat.stop_reason() is not None and "across its runs" in str(seat.stop_reason())


def test_warn_keeps_going_and_says_so_once(ledger: Ledger) -> None:
    _run(ledger, "r1")
    said: list[str] = []
    meter = RunMeter(
        ledger,
        task_id="t1",
        run_id="r1",
        limits=BudgetLimits(run_tokens=10, action=BudgetAction.WARN),
        clock=lambda: NOW,
        warn=said.append,
    )
    seat = meter.dispatch(coder_key("t1", "r1", 1, 1, "llm"))
    seat.report(UsageFigures(tokens_in=20))
    seat.report(UsageFigures(tokens_in=40))
    assert seat.stop_reason() is None and meter.exhausted is not None
    assert len(said) == 1 and "budgets.on_exhausted: warn" in said[0]


def test_a_resumed_meter_starts_from_the_journal_and_a_second_dispatch_is_new(
    ledger: Ledger,
) -> None:
    _run(ledger, "r1")
    key = coder_key("t1", "r1", 1, 1, "codex")
    _meter(ledger).dispatch(key).report(UsageFigures(tokens_in=300))
    again = _meter(ledger)  # the same run, on another worker after the first was lost
    assert again.spent.tokens == 300
    redo = again.dispatch(key)
    assert redo.key.dispatch == "a1.s1~2"
    redo.report(UsageFigures(tokens_in=100))  # a new dispatch: its own spending, added
    assert again.spent.tokens == 400
    # Recovery reading the first dispatch's log continues it: nothing counted twice.
    again.dispatch(key, continuing=True).finish(UsageFigures(tokens_in=320))
    assert sum(d.figures.tokens for d in ledger.usage(run_id="r1")) == 420


def test_seats_reporting_at_once_lose_nothing(ledger: Ledger) -> None:
    _run(ledger, "r1")
    meter = _meter(ledger)

    def seat(number: int) -> None:
        spending = meter.dispatch(coder_key("t1", "r1", 1, number, "llm"))
        for step in range(1, 21):
            spending.report(UsageFigures(tokens_in=step * 10, tokens_out=step))

    threads = [threading.Thread(target=seat, args=(n,)) for n in (1, 2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Spend.of(d.figures for d in ledger.usage(run_id="r1")).tokens == 3 * 220


def test_a_cost_known_in_part_reads_back_from_the_journal_as_it_was(ledger: Ledger) -> None:
    _run(ledger, "r1")
    seat = _meter(ledger, run_cost_usd=0.05).dispatch(coder_key("t1", "r1", 1, 1, "llm"))
    figures = UsageFigures()
    for cost in (0.01, 0.01, None, 0.01, 0.01):
        figures = with_call(figures, tokens_in=100, tokens_out=20, cost_usd=cost, model="m")
        seat.report(figures)
    assert seat.stop_reason() is None  # $0.04 known of a $0.05 cap
    figures = with_call(figures, tokens_in=100, tokens_out=20, cost_usd=0.01, model="m")
    seat.report(figures)
    assert seat.stop_reason() is not None  # the known part reached it
    [read] = ledger.usage(run_id="r1")
    assert read.figures.tokens == figures.tokens == 720
    assert (read.figures.known_cost, read.figures.priced) == (0.05, False)


def test_an_absurd_count_is_journaled_bounded_and_spends_the_budget(ledger: Ledger) -> None:
    """A report no 64-bit column holds (a model can make aider print any ``Tokens:`` line):
    journaled at the bound, never failing the insert, and the run's budget is spent."""
    _run(ledger, "r1")
    meter = _meter(ledger, run_tokens=100_000)
    seat = meter.dispatch(coder_key("t1", "r1", 1, 1, "aider"))
    seat.report(UsageFigures(tokens_in=10**26, tokens_out=10**26))
    result = metered(seat, DispatchResult(exit_code=0))
    assert result.tokens_used == 2 * MAX_COUNT < 2**63
    assert seat.stop_reason() is not None
    [journaled] = ledger.usage(run_id="r1")
    assert journaled.figures.tokens == 2 * MAX_COUNT


def test_a_dispatch_that_reports_no_counts_says_no_budget_can_count_it(ledger: Ledger) -> None:
    _run(ledger, "r1")
    said: list[str] = []
    meter = RunMeter(
        ledger,
        task_id="t1",
        run_id="r1",
        limits=BudgetLimits(run_tokens=1000),
        clock=lambda: NOW,
        warn=said.append,
    )
    seat = meter.dispatch(coder_key("t1", "r1", 1, 1, "llm"))
    figures = UsageFigures(reported=False)
    for _ in range(3):
        figures = with_call(figures, tokens_in=0, tokens_out=0, cost_usd=None, model="m",
                            counted=False)  # fmt: skip
        seat.report(figures)
    seat.finish(figures)
    assert said == ["a1.s1 (llm) reported no usage: no budget can count it"]
    [read] = ledger.usage(run_id="r1")
    assert not read.figures.reported


def test_a_result_whose_cost_is_known_in_part_carries_no_cost(ledger: Ledger) -> None:
    _run(ledger, "r1")
    seat = _meter(ledger).dispatch(coder_key("t1", "r1", 1, 1, "llm"))
    partial = with_call(UsageFigures(), tokens_in=10, tokens_out=1, cost_usd=0.01, model="m")
    partial = with_call(partial, tokens_in=10, tokens_out=1, cost_usd=None, model="m")
    result = metered(seat, DispatchResult(exit_code=0, usage=partial))
    assert (result.tokens_used, result.cost_usd) == (22, None)  # $0.01 is only a floor
