"""The totals kept on each task's row for the queue (its coders, known cost, unknown-cost
dispatches, run time) are what the rows they sum say, after real writes through the Ledger, on
SQLite and PostgreSQL: a run killed mid-way (its usage journaled, its close written later, as
recovery writes it) included."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from ledger_driver import Driver

from assay.adapters.store.schema import tasks
from assay.adapters.store.sql import Ledger
from assay.adapters.store.task_totals import coders_text
from assay.adapters.store.usage_log import DispatchKey
from assay.core.settle import Verdict
from assay.core.tasks import Task
from assay.core.usage import UsageFigures
from assay.core.vocab import RunStatus, UsageRole
from assay.web import view_usage


def _stored(ledger: Ledger, task_id: str) -> tuple[str | None, float, int, float]:
    query = sa.select(
        tasks.c.coders, tasks.c.cost_usd, tasks.c.cost_unknown, tasks.c.run_seconds
    ).where(tasks.c.id == task_id)
    with ledger.read() as conn:
        row = conn.execute(query).one()
    return row[0], float(row[1]), int(row[2]), float(row[3])


def _spend(ledger: Ledger, key: DispatchKey, figures: UsageFigures, priced: bool) -> None:
    ledger.record_usage(key, figures, priced=priced, at=ledger.get_task(key.task_id).updated_at)


def _key(run_id: str, dispatch: str) -> DispatchKey:
    return DispatchKey("t1", run_id, dispatch, UsageRole.CODER, "claude", attempt=1, seat=1)


def test_coders_are_each_kind_and_model_named() -> None:
    assert coders_text(None) is None
    assert coders_text({"task": "x"}) is None  # the default coder, not named
    assert coders_text({"coder": "llm"}) == "|kind=llm|"
    listed = [{"kind": "claude", "model": "opus|4"}, "aider"]
    assert coders_text({"coder": listed}) == "|kind=claude|model=opus/4|kind=aider|"


def test_stored_totals_agree_with_the_journal_and_the_runs(ledger: Ledger, driver: Driver) -> None:
    task = Task.new(id="t1", title="t", instruction="do it", now=driver.now())
    ledger.add_task(task, contract={"task": "t", "coder": {"kind": "claude", "model": "opus"}})
    assert _stored(ledger, "t1") == ("|kind=claude|model=opus|", 0.0, 0, 0.0)

    # A run that closes: two increases of one priced dispatch.
    started = driver.start("t1", "r1")
    _spend(ledger, _key("r1", "a1.s1"), UsageFigures(10, 5, cost_usd=0.10), True)
    _spend(ledger, _key("r1", "a1.s1"), UsageFigures(10, 5, cost_usd=0.05), True)
    assert _stored(ledger, "t1")[1:3] == (pytest.approx(0.15), 0)
    ledger.close_run(driver.close_for(started, "r1", Verdict(status=RunStatus.FAILED)))

    # A run killed mid-way: a dispatch that reported tokens without a cost, one priced then
    # not, one that reported nothing; what it spent counts before any close is written.
    started = driver.start("t1", "r2")
    _spend(ledger, _key("r2", "a1.s1"), UsageFigures(7, 7), False)
    _spend(ledger, _key("r2", "a1.s2"), UsageFigures(1, 1, cost_usd=0.25), True)
    _spend(ledger, _key("r2", "a1.s2"), UsageFigures(1, 1), False)
    _spend(ledger, _key("r2", "a1.s3"), UsageFigures(reported=False), False)
    with ledger.read() as conn:
        spend, _per_run = view_usage.task_usage(conn, "t1")
    assert spend is not None and spend.cost_usd is None  # unknown: a lower bound only
    _coders, cost, unknown, seconds = _stored(ledger, "t1")
    assert cost == pytest.approx(spend.priced_cost_usd) == pytest.approx(0.40)
    assert unknown == spend.unpriced + spend.unreported == 3
    run_times = [r.finished_at - r.started_at for r in ledger.runs("t1") if r.finished_at]
    assert seconds == pytest.approx(sum(run_times, timedelta()).total_seconds(), abs=1e-3)

    # Recovery closes the killed run later (refunded): its time is added, the cost stays.
    driver.clock += timedelta(minutes=10)
    ledger.close_run(driver.close_for(started, "r2", Verdict(status=RunStatus.STALLED)))
    runs = ledger.runs("t1")
    assert len(runs) == 2 and all(r.finished_at for r in runs)
    took = sum((r.finished_at - r.started_at for r in runs if r.finished_at), timedelta())
    assert took > timedelta(minutes=10)
    assert _stored(ledger, "t1")[1:] == (
        pytest.approx(0.40),
        3,
        pytest.approx(took.total_seconds(), abs=1e-3),
    )
