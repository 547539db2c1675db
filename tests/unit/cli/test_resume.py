"""The line `assay run --resume` prints per recovered run, and the exit code recovery makes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from assay.adapters.store.records import RunRecord
from assay.cli.resume import recovered_exit, recovered_line
from assay.core.tasks import Task
from assay.core.vocab import RunStatus, SettleRow, TaskStatus

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def record(status: RunStatus, *, spent: bool = False) -> RunRecord:
    return RunRecord(
        id="r1",
        task_id="t1",
        status=status,
        started_at=NOW,
        finished_at=NOW,
        settle_row=SettleRow.SUCCEEDED if status is RunStatus.MERGED else SettleRow.PARKED,
        attempt_spent=spent,
    )


def task(status: TaskStatus, **fields: object) -> Task:
    made = Task.new(id="t1", title="x", instruction="x", now=NOW)
    return made.model_copy(update={"status": status, **fields})


def test_a_landed_run() -> None:
    line = recovered_line(record(RunStatus.MERGED, spent=True), task(TaskStatus.DONE), NOW)
    assert line == "recovered r1: merged (task t1 done)"


def test_an_interrupted_run_refunded() -> None:
    line = recovered_line(record(RunStatus.FAILED), task(TaskStatus.FAILED), NOW)
    assert line == "recovered r1: interrupted, refunded (task t1 failed, runnable)"


def test_an_interrupted_run_whose_task_waits() -> None:
    later = NOW + timedelta(minutes=5)
    line = recovered_line(record(RunStatus.FAILED), task(TaskStatus.FAILED, not_before=later), NOW)
    assert line == (
        "recovered r1: interrupted, refunded "
        "(task t1 failed, runnable after 2026-12-01 08:05:00 UTC)"
    )


def test_a_held_task_names_its_reason_and_exits_3() -> None:
    held = task(TaskStatus.HELD, hold_reason="3 refunded runs in a row")
    line = recovered_line(record(RunStatus.FAILED), held, NOW)
    assert line == "recovered r1: held (task t1): 3 refunded runs in a row"
    assert recovered_exit([task(TaskStatus.DONE), held]) == 3
    assert recovered_exit([task(TaskStatus.DONE), task(TaskStatus.FAILED)]) == 0
    assert recovered_exit([]) == 0
