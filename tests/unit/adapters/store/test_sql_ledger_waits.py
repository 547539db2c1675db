"""A task's quota wait in the ledger: written with the run's close, read back, migrated."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from ledger_driver import Driver, LedgerTarget

from assay.adapters.store.schema import tasks
from assay.adapters.store.sql import HEAD_REVISION, MIGRATIONS, Ledger
from assay.core.backoff import quota_wait
from assay.core.settle import Verdict
from assay.core.vocab import RunStatus, SettleRow, TaskStatus
from assay.engine.recovery.refunds import closed_quota_streak

QUOTA = Verdict(status=RunStatus.STALLED, quota_hit=True)


def refunded_and_waiting(driver: Driver, task_id: str, run_id: str, minutes: int) -> None:
    """Close a quota-lost run of ``task_id`` the way the runner does: settle, wait, close."""
    task = driver.start(task_id, run_id)
    close = driver.close_for(task, run_id, QUOTA)
    close.task.wait_until(close.finished_at + timedelta(minutes=minutes), close.finished_at)
    driver.ledger.close_run(close)


def test_the_wait_is_written_with_the_close_and_read_back(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    refunded_and_waiting(driver, "t1", "r1", 10)
    task = ledger.get_task("t1")
    assert task.status is TaskStatus.FAILED and task.attempts == 0
    assert task.not_before == driver.clock + timedelta(minutes=10)
    assert task.not_before.tzinfo is not None
    assert [t.id for t in ledger.list_tasks(TaskStatus.FAILED)] == ["t1"]
    assert ledger.runs("t1")[0].settle_row is SettleRow.STALLED_QUOTA


def test_an_operator_move_clears_it_and_a_new_run_consumes_it(
    ledger: Ledger, driver: Driver
) -> None:
    driver.add("t1")
    refunded_and_waiting(driver, "t1", "r1", 10)
    task = ledger.get_task("t1")
    task.skip_wait(driver.now())
    ledger.save_task(task)
    assert ledger.get_task("t1").not_before is None

    refunded_and_waiting(driver, "t1", "r2", 10)
    driver.start("t1", "r3")  # run anyway: the start clears the wait in the ledger too
    assert ledger.get_task("t1").not_before is None


def test_the_streak_comes_from_the_closed_runs(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    driver.cycle("t1", "r0", RunStatus.FAILED)  # a real failure: not part of the streak
    expected = []
    for n in range(1, 5):
        task = driver.start("t1", f"r{n}")
        now = driver.now()
        expected.append(quota_wait(None, now, closed_quota_streak(ledger, task.id) + 1) - now)
        close = driver.close_for(task, f"r{n}", QUOTA)
        close.task.wait_until(now + expected[-1], close.finished_at)
        ledger.close_run(close)
    assert expected == [timedelta(minutes=m) for m in (1, 2, 4, 8)]
    assert ledger.get_task("t1").attempts == 1  # the storm spent nothing; the failure did


def test_migrating_from_0001_keeps_every_task_and_adds_no_wait(target: LedgerTarget) -> None:
    ledger = target.open(migrate=False)
    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    with ledger._engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0001")
    with ledger._engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO tasks (id, title, instruction, status, created_at, updated_at) "
                "VALUES ('old', 'old task', 'do it', 'failed', :at, :at)"
            ),
            {"at": "2026-01-01 00:00:00"},
        )
    assert ledger.revision() == "0001"
    assert ledger.migrate() == HEAD_REVISION
    task = ledger.get_task("old")
    assert task.status is TaskStatus.FAILED and task.not_before is None
    with ledger._engine.connect() as conn:
        assert conn.execute(sa.select(tasks.c.not_before)).scalar_one() is None
