"""``task list`` prints every backend's tasks from one row type, built by one function
(``task_rows.read_rows``) from one SQL text; what still differs is each driver's values (text
times from SQLite, aware datetimes from PostgreSQL's driver, NULLs, counts), so these tests
read one ledger of tricky values every way and hold the rows to the models' reading of it."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from ledger_driver import Driver, LedgerTarget, Wave

from assay.adapters.store.quick_read import QuickLedger
from assay.adapters.store.sql import Ledger
from assay.adapters.store.task_rows import TaskRow, task_row
from assay.adapters.store.task_sql import TASK_FIELDS
from assay.core.settle import Verdict
from assay.core.tasks import Task
from assay.core.vocab import AttemptOutcome, RunStatus, TaskStatus

T0 = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
FAR = datetime(2999, 1, 1, tzinfo=UTC)


def _fill(ledger: Ledger) -> None:
    """A unicode title, a hold reason with a tab, times with and without microseconds, a
    task with no attempts (no stage record: a NULL joined), runs in order, a far wait."""
    ledger.add_task(Task.new(id="t-uni", title="réparer le 漢字 bug ✓", instruction="ü\nx", now=T0))
    held = Task.new(id="t-held", title="held one", instruction="x", now=T0)
    held.hold("waiting for the  design\treview", T0 + timedelta(seconds=1))
    ledger.add_task(held)
    micro = T0 + timedelta(microseconds=120000)
    ledger.add_task(Task.new(id="t-micro", title="micro", instruction="y", now=micro))
    placed = Task.new(
        id="t-placed", title="p", instruction="z", now=T0, repository="gh.io/o/r", branch="dev"
    )
    ledger.add_task(placed)
    driver = Driver(ledger, start=T0 + timedelta(seconds=5))
    driver.add("t-runs")
    waves = (Wave(AttemptOutcome.BLOCKED, 2, ("a failed",)), Wave(AttemptOutcome.PASSED, 1, ()))
    driver.cycle("t-runs", "r-2", RunStatus.FAILED, waves, max_attempts=5, judge_calls=1)
    driver.cycle("t-runs", "r-1", RunStatus.FAILED, waves, max_attempts=5)  # started later
    driver.add("t-wait")
    task = driver.start("t-wait", "r-3")
    verdict = Verdict(status=RunStatus.FAILED, quota_hit=True, no_viable_candidates=True)
    ledger.close_run(driver.close_for(task, "r-3", verdict))
    ledger.change_task("t-wait", lambda t: _wait(t, FAR))


def _wait(task: Task, until: datetime) -> dict[str, str]:
    task.wait_until(until, task.updated_at)
    return {}


def _documents(rows: tuple[list[TaskRow], list[tuple[str, str]]]) -> list[Any]:
    return [row.as_json() for row in rows[0]] + rows[1]


def test_every_backend_reads_the_models_values(target: LedgerTarget) -> None:
    ledger = target.open()
    _fill(ledger)
    for status in (None, *TaskStatus):
        expected = [t.model_dump(mode="json") for t in ledger.list_tasks(status)]
        assert _documents(ledger.scan_task_rows(status)) == expected, (target.backend, status)
    (rows, unreadable) = ledger.scan_task_rows()
    by_id = {row.id: row for row in rows}
    assert unreadable == [] and list(by_id) == [
        "t-held",
        "t-placed",
        "t-uni",
        "t-micro",
        "t-runs",
        "t-wait",
    ]
    assert by_id["t-micro"].as_json()["created_at"] == "2026-03-04T05:06:07.120000Z"
    assert by_id["t-runs"].run_ids == ["r-2", "r-1"] and by_id["t-runs"].attempts == 2
    assert by_id["t-uni"].attempts == 0 and by_id["t-uni"].not_before is None
    assert by_id["t-wait"].not_before == FAR and by_id["t-wait"].as_json()["not_before"] == (
        "2999-01-01T00:00:00Z"
    )


def test_the_sqlite3_reader_reads_what_the_ledger_reads(tmp_path: Path) -> None:
    path = tmp_path / "assay.db"
    with Ledger.open(f"sqlite:///{path}") as ledger:
        _fill(ledger)
        with sqlite3.connect(path) as db:  # times a hand or another writer may have stored
            edit = "UPDATE tasks SET {} = '{}' WHERE id = '{}'"
            db.execute(edit.format("created_at", "2026-03-04T07:06:07+02:00", "t-uni"))
            db.execute(edit.format("updated_at", "2026-03-04 05:06:07", "t-uni"))
            db.execute(edit.format("not_before", "2999-01-01T00:00:00", "t-wait"))
        quick = QuickLedger(path)
        for status in (None, *TaskStatus):
            expected = [t.model_dump(mode="json") for t in ledger.list_tasks(status)]
            assert _documents(quick.tasks(status)) == expected, status
            assert _documents(ledger.scan_task_rows(status)) == expected, status
    (uni,) = [row for row in quick.tasks()[0] if row.id == "t-uni"]
    assert uni.as_json()["created_at"] == "2026-03-04T05:06:07Z" == uni.as_json()["updated_at"]


def test_a_drivers_datetimes_and_nulls_read_as_the_models_read_them() -> None:
    # PostgreSQL's driver gives aware datetimes (in the session's zone), SQLite's text; a
    # naive one (a driver that drops the zone) is UTC, as schema.UTCDateTime reads it.
    zone = timezone(timedelta(hours=-5))
    task = Task.new(id="t1", title="t", instruction="i", now=T0 + timedelta(microseconds=5))
    stored = {
        **task.model_dump(mode="json"),
        "created_at": (T0 + timedelta(microseconds=5)).astimezone(zone),
        "updated_at": T0.replace(tzinfo=None),
        "not_before": FAR.astimezone(zone),
    }
    row = task_row(tuple(stored[name] for name in TASK_FIELDS), [])
    expected = task.model_copy(update={"not_before": FAR, "updated_at": T0})
    assert row.as_json() == expected.model_dump(mode="json")
    assert row.not_before == FAR and row.not_before.tzinfo is UTC


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        ("UPDATE tasks SET status = 'zombie' WHERE id = 't-c'", "status 'zombie': not one of"),
        ("UPDATE tasks SET title = X'41' WHERE id = 't-c'", "title: not text"),  # a blob
        ("UPDATE tasks SET created_at = 'yesterday' WHERE id = 't-c'", "created_at 'yesterday'"),
        ("UPDATE tasks SET hold_source = 'alien' WHERE id = 't-c'", "hold_source 'alien'"),
        ("UPDATE tasks SET last_error = X'41' WHERE id = 't-c'", "last_error: not text"),
        ("UPDATE stage_records SET attempts = 'many' WHERE task_id = 't-c'", "attempts 'many'"),
        ("UPDATE runs SET id = X'35' WHERE task_id = 't-c'", "run_ids: not a run id"),
    ],
)
def test_a_row_that_is_not_a_task_is_listed_as_unreadable_by_both_readers(
    tmp_path: Path, sql: str, said: str
) -> None:
    path = tmp_path / "assay.db"
    with Ledger.open(f"sqlite:///{path}") as ledger:
        driver = Driver(ledger)
        for task_id in ("t-a", "t-c"):
            driver.add(task_id)
        driver.cycle("t-c", "r-1", RunStatus.FAILED, max_attempts=4)
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA foreign_keys = OFF")
            db.execute(sql)
        for rows, unreadable in (ledger.scan_task_rows(), QuickLedger(path).tasks()):
            assert [row.id for row in rows] == ["t-a"], sql
            assert [task_id for task_id, _ in unreadable] == ["t-c"]
            assert said in unreadable[0][1], unreadable
