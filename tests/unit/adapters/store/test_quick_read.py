"""The sqlite3 reader (``task list``'s before SQLAlchemy is imported) reads the revision the
Ledger migrates to, and says when it cannot read; that it reads what the Ledger reads is
``test_task_rows``'s."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from ledger_driver import Driver, Wave

from assay.adapters.store.quick_read import NotQuick, QuickLedger
from assay.adapters.store.sql import Ledger
from assay.core.vocab import AttemptOutcome, RunStatus


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
        titles = [t.title for t in QuickLedger(tmp_path / "assay.db").tasks()[0]]
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert "changing" not in titles and len(titles) == 3
