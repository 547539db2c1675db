"""A ledger another process holds locked: wait the timeout, then LedgerLocked names the file."""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from assay.adapters.store.connect import LedgerLocked, busy_timeout_seconds
from assay.adapters.store.sql import Ledger
from assay.core.tasks import Task

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(("raw", "seconds"), [(None, 15.0), ("2", 2.0), ("0.5", 0.5), ("x", 15.0)])
def test_the_busy_timeout_is_configurable(
    monkeypatch: pytest.MonkeyPatch, raw: str | None, seconds: float
) -> None:
    if raw is None:
        monkeypatch.delenv("ASSAY_DB_TIMEOUT", raising=False)
    else:
        monkeypatch.setenv("ASSAY_DB_TIMEOUT", raw)
    assert busy_timeout_seconds() == seconds


def test_a_write_waits_the_timeout_then_names_the_locked_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ASSAY_DB_TIMEOUT", "0.4")
    path = tmp_path / "assay.db"
    with Ledger.open(f"sqlite:///{path}") as ledger:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        started = time.monotonic()
        try:
            with pytest.raises(LedgerLocked) as info:
                ledger.add_task(Task.new(id="t1", title="x", instruction="x", now=NOW))
        finally:
            holder.close()
        assert time.monotonic() - started >= 0.35
        assert info.value.database == str(path)
        assert str(path) in str(info.value) and "waited 0.4 s" in str(info.value)
        # Nothing was half-written: the task is not there, and it can be added now.
        assert [t.id for t in ledger.list_tasks()] == []
        ledger.add_task(Task.new(id="t1", title="x", instruction="x", now=NOW))


def test_a_stage_row_from_a_newer_version_is_kept_apart(tmp_path: Path) -> None:
    path = tmp_path / "assay.db"
    with Ledger.open(f"sqlite:///{path}") as ledger:
        ledger.add_task(Task.new(id="t1", title="x", instruction="x", now=NOW))
        with sqlite3.connect(path) as db:
            db.execute("INSERT INTO stage_records VALUES ('t1', 'verify', 2, 'deferred', '[]')")
            db.execute("INSERT INTO stage_records VALUES ('t1', 'land', 1, 'paused', '[]')")
        convergence = ledger.ledger("t1")
    assert set(convergence.foreign_stages) == {"verify", "land"}
    assert convergence.foreign_stages["land"].last_verdict == "paused"
    assert "verify" not in convergence.stage_state and "land" not in convergence.stage_state
