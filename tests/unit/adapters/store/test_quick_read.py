"""The quick read path (``task list``'s) reads what the Ledger reads, and says when it cannot."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from ledger_driver import Driver, Wave

from assay.adapters.store import quick_read
from assay.adapters.store.quick_read import NotQuick, QuickLedger
from assay.adapters.store.sql import HEAD_REVISION, Ledger
from assay.core.vocab import AttemptOutcome, RunStatus, TaskStatus


def test_it_reads_the_revision_the_ledger_migrates_to() -> None:
    # A new migration must be read here too before the quick path reads that revision.
    assert quick_read.REVISION == HEAD_REVISION


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    made = Ledger.open(f"sqlite:///{tmp_path / 'assay.db'}")
    driver = Driver(made)
    for task_id in ("t-a", "t-b", "t-c"):
        driver.add(task_id)
    waves = (Wave(AttemptOutcome.BLOCKED, 1, ("x failed",)), Wave(AttemptOutcome.PASSED, 1, ()))
    driver.cycle("t-a", "r-1", RunStatus.FAILED, waves, max_attempts=4, judge_calls=2)
    driver.cycle("t-a", "r-2", RunStatus.FAILED, (Wave(findings=("x  failed",)),), max_attempts=4)
    driver.cycle("t-b", "r-3", RunStatus.MERGED, (Wave(AttemptOutcome.PASSED),))
    return made


def test_every_read_matches_the_ledgers(ledger: Ledger, tmp_path: Path) -> None:
    quick = QuickLedger(tmp_path / "assay.db")
    for status in (None, *TaskStatus):
        expected = [t.model_dump(mode="json") for t in ledger.list_tasks(status)]
        assert [r.as_json() for r in quick.tasks(status)] == expected, status


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE tasks SET status = 'zombie' WHERE id = 't-c'",
        "UPDATE tasks SET title = X'41' WHERE id = 't-c'",  # a blob, not text
        "UPDATE tasks SET created_at = 'yesterday' WHERE id = 't-c'",
        "UPDATE tasks SET hold_source = 'alien' WHERE id = 't-c'",
    ],
)
def test_a_row_the_models_would_judge_is_not_read_here(
    ledger: Ledger, tmp_path: Path, sql: str
) -> None:
    with sqlite3.connect(tmp_path / "assay.db") as db:
        db.execute(sql)
    with pytest.raises(NotQuick):
        QuickLedger(tmp_path / "assay.db").tasks()


def test_no_file_or_another_revision_is_not_read_here(ledger: Ledger, tmp_path: Path) -> None:
    with pytest.raises(NotQuick):
        QuickLedger(tmp_path / "missing.db")
    with sqlite3.connect(tmp_path / "assay.db") as db:
        db.execute("UPDATE alembic_version SET version_num = '0099'")
    with pytest.raises(NotQuick):
        QuickLedger(tmp_path / "assay.db")


def test_it_reads_a_wal_ledger_while_a_writer_holds_its_lock(
    ledger: Ledger, tmp_path: Path
) -> None:
    writer = sqlite3.connect(tmp_path / "assay.db", isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE tasks SET title = 'changing' WHERE id = 't-c'")
        titles = [t.title for t in QuickLedger(tmp_path / "assay.db").tasks()]
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert "changing" not in titles and len(titles) == 3
