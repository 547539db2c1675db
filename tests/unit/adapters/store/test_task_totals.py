"""The totals kept on each task's row for the queue (its coders, known cost, unknown-cost
dispatches, run time, spent attempts) are what the rows they sum say, after real writes through
the Ledger, on SQLite and PostgreSQL: a run killed mid-way (its usage journaled, its close
written later, as recovery writes it) included."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from ledger_driver import Driver, alembic_to

from assay.adapters.store.schema import stage_records, tasks
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
    listed = [{"kind": "claude", "model": "Opus|4"}, "aider"]
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


def _attempts_apart(ledger: Ledger) -> dict[str, tuple[int, int]]:
    """Each task's (copied attempts, its ``task`` stage record's count) where they differ."""
    stage = sa.and_(stage_records.c.task_id == tasks.c.id, stage_records.c.stage == "task")
    query = sa.select(
        tasks.c.id, tasks.c.sort_attempts, sa.func.coalesce(stage_records.c.attempts, 0)
    ).select_from(tasks.outerjoin(stage_records, stage))
    with ledger.read() as conn:
        return {row[0]: (row[1], row[2]) for row in conn.execute(query) if row[1] != row[2]}


def _copied_attempts(ledger: Ledger) -> dict[str, int]:
    with ledger.read() as conn:
        return {
            row[0]: row[1] for row in conn.execute(sa.select(tasks.c.id, tasks.c.sort_attempts))
        }


def test_copied_attempts_are_the_stage_records_after_every_write(
    ledger: Ledger, driver: Driver
) -> None:
    """Added, run (spent), refunded, held and released (reset), run again, deleted: after each
    write the queue's copy of every task's spent attempts is its stage record's count."""
    for task_id in ("t1", "t2", "t3"):
        driver.add(task_id)
    assert _copied_attempts(ledger) == {"t1": 0, "t2": 0, "t3": 0}
    started = driver.start("t1", "r1")  # the start spends one
    assert _copied_attempts(ledger)["t1"] == 1 and not _attempts_apart(ledger)
    ledger.close_run(driver.close_for(started, "r1", Verdict(status=RunStatus.FAILED)))
    driver.cycle("t1", "r2", RunStatus.FAILED)
    driver.cycle("t2", "r3", RunStatus.FAILED)
    assert _copied_attempts(ledger) == {"t1": 2, "t2": 1, "t3": 0}
    assert not _attempts_apart(ledger)

    started = driver.start("t2", "r4")
    assert _copied_attempts(ledger)["t2"] == 2
    # A provider fault lost every seat: the close refunds the attempt.
    fault = Verdict(status=RunStatus.FAILED, machine_fault=True, no_viable_candidates=True)
    close = driver.close_for(started, "r4", fault)
    assert not close.settlement.attempt_spent
    ledger.close_run(close)
    assert _copied_attempts(ledger)["t2"] == 1 and not _attempts_apart(ledger)

    held = ledger.get_task("t1")  # an operator parks it, then lets it run afresh
    held.hold("look first", driver.now())
    ledger.save_task(held)
    ledger.change_task("t1", lambda task: task.release(driver.now()) or {})
    assert _copied_attempts(ledger)["t1"] == 0 and not _attempts_apart(ledger)
    driver.cycle("t1", "r5", RunStatus.FAILED)
    ledger.delete_tasks(["t3"])
    assert _copied_attempts(ledger) == {"t1": 1, "t2": 1}
    assert not _attempts_apart(ledger)


def test_the_migration_fills_what_the_writes_keep(ledger: Ledger, driver: Driver) -> None:
    """Down to 0010 (the columns gone) and up again: the backfill says what the writes did."""
    contract = {"task": "t", "coder": [{"kind": "llm", "model": "gpt-5"}, "aider"]}
    ledger.add_task(
        Task.new(id="t1", title="t", instruction="x", now=driver.now()), contract=contract
    )
    driver.add("t2")  # no contract kept, never run
    started = driver.start("t1", "r1")
    _spend(ledger, _key("r1", "a1.s1"), UsageFigures(3, 3, cost_usd=0.2), True)
    _spend(ledger, _key("r1", "a1.s2"), UsageFigures(3, 3), False)
    driver.clock += timedelta(minutes=3)
    ledger.close_run(driver.close_for(started, "r1", Verdict(status=RunStatus.FAILED)))
    driver.start("t1", "r2")  # open: no time of its own yet
    _spend(ledger, _key("r2", "a1.s1"), UsageFigures(1, 1, cost_usd=0.05), True)
    written = [_stored(ledger, task_id) for task_id in ("t1", "t2")]
    spent = _copied_attempts(ledger)
    assert written[0][0] == "|kind=llm|model=gpt-5|kind=aider|" and written[0][2] == 1
    alembic_to(ledger, "0010", down=True)
    alembic_to(ledger, "head")
    filled = [_stored(ledger, task_id) for task_id in ("t1", "t2")]
    assert _copied_attempts(ledger) == spent == {"t1": 2, "t2": 0}
    assert filled[1] == written[1] == (None, 0.0, 0, 0.0)
    assert filled[0][0] == written[0][0] and filled[0][2] == written[0][2]
    assert filled[0][1] == pytest.approx(written[0][1]) == pytest.approx(0.25)
    assert filled[0][3] == pytest.approx(written[0][3], abs=1e-3) and filled[0][3] > 180
