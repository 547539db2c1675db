"""The refund streak read back from a real SQLite ledger: interrupted runs (the parked row)
count towards ``budgets.max_refunds`` like any machine fault, and a release starts it again."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from assay.adapters.store.sql import Ledger
from assay.core.contract import Contract
from assay.core.tasks import Task
from assay.core.vocab import HoldSource, SettleRow, TaskStatus
from assay.engine.local.runner import recover_interrupted
from assay.engine.recovery.refunds import refund_streak

START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    opened = Ledger.open(f"sqlite:///{tmp_path / 'assay.db'}")
    opened.migrate()
    opened.add_task(Task.new(id="t1", title="t", instruction="i", now=START))
    return opened


def interrupt(ledger: Ledger, home: Path, number: int, max_refunds: int = 3) -> Task:
    """Start run ``number`` of the task, let its process "die", and recover it."""
    now = START + timedelta(minutes=number)
    task = ledger.get_task("t1")
    task.start(now, run_id=f"r{number}")
    ledger.start_run(task, f"r{number}", started_at=now)
    (home / "runs" / f"r{number}").mkdir(parents=True)  # a run of this home: its folder is here
    contract = Contract(task="i", budgets={"max_refunds": max_refunds})  # type: ignore[arg-type]
    subprocess.run(["git", "init", "-q", str(home)], check=True)
    recovered = recover_interrupted(
        repo=home, home=home, ledger=ledger, contract_for=lambda _id: contract, clock=lambda: now
    )
    assert recovered == [f"r{number}"]
    return ledger.get_task("t1")


def test_interrupted_runs_in_a_row_hold_the_task(ledger: Ledger, tmp_path: Path) -> None:
    assert interrupt(ledger, tmp_path, 1).status is TaskStatus.FAILED
    assert refund_streak(ledger, "t1").count == 1
    assert interrupt(ledger, tmp_path, 2).status is TaskStatus.FAILED
    held = interrupt(ledger, tmp_path, 3)
    assert held.status is TaskStatus.HELD and held.hold_source is HoldSource.MACHINE
    assert held.attempts == 0  # every interrupted attempt was still refunded
    assert held.hold_reason is not None
    assert held.hold_reason.startswith("3 refunded runs in a row (budgets.max_refunds: 3)")
    assert held.hold_reason.count("interrupted: the process running it died") == 3
    assert [r.settle_row for r in ledger.runs("t1")] == [SettleRow.PARKED] * 3


def test_a_release_starts_the_streak_again(ledger: Ledger, tmp_path: Path) -> None:
    for number in (1, 2):
        interrupt(ledger, tmp_path, number, max_refunds=2)
    task = ledger.get_task("t1")
    assert task.status is TaskStatus.HELD
    task.release(START + timedelta(hours=1))
    ledger.save_task(task)
    assert refund_streak(ledger, "t1").count == 0
    assert interrupt(ledger, tmp_path, 3, max_refunds=2).status is TaskStatus.FAILED
    assert interrupt(ledger, tmp_path, 4, max_refunds=2).status is TaskStatus.HELD


def test_skipping_a_wait_does_not_reset_the_streak(ledger: Ledger, tmp_path: Path) -> None:
    interrupt(ledger, tmp_path, 1)
    task = ledger.get_task("t1")
    task.skip_wait(START + timedelta(minutes=5))  # `assay task release` of a waiting task
    ledger.save_task(task)
    assert refund_streak(ledger, "t1").count == 1
    assert refund_streak(ledger, "t1").faults[0].startswith("interrupted")
