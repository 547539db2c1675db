"""A run's logs in the ledger (revision 0010): shipped (each ship replacing what an earlier one
kept of the same file, in one transaction), listed without their text, read by name, deleted
with their task; and a 0009 ledger upgrades to keep them. On SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from ledger_driver import Driver, LedgerTarget, alembic_to

from assay.adapters.store.sql import HEAD_REVISION, LedgerConflict
from assay.core.run_logs import KeptLog
from assay.core.settle import Verdict
from assay.core.vocab import LogRole, RunStatus

NOW = datetime(2026, 12, 6, tzinfo=UTC)
CODER = KeptLog("attempt-1/seat-1/coder-attempt1.log", LogRole.CODER, 1, 1, 12, "coder ran\n",
                False)  # fmt: skip
JUDGE = KeptLog("attempt-1/judges/judge-1/round-1/judge.jsonl", LogRole.JUDGE, 1, None, 9_000,
                "{}\n… 8,997 bytes cut …\n", True)  # fmt: skip


def test_logs_are_shipped_listed_without_text_and_read_by_name(driver: Driver) -> None:
    ledger = driver.ledger
    driver.add("t1")
    driver.start("t1", "r1")
    ledger.ship_logs("r1", [CODER, JUDGE], at=NOW)
    listed = ledger.run_logs("r1")
    assert [(e.name, e.role, e.attempt, e.seat, e.size, e.truncated, e.text) for e in listed] == [
        (JUDGE.name, LogRole.JUDGE, 1, None, 9_000, True, None),
        (CODER.name, LogRole.CODER, 1, 1, 12, False, None),
    ]
    read = ledger.run_log("r1", CODER.name)
    assert read is not None and read.text == "coder ran\n" and read.updated_at == NOW
    assert ledger.run_log("r1", "attempt-9/none.log") is None
    assert ledger.run_logs("no-such-run") == []


def test_a_second_ship_replaces_what_the_first_kept(driver: Driver) -> None:
    ledger = driver.ledger
    driver.add("t1")
    driver.start("t1", "r1")
    ledger.ship_logs("r1", [CODER], at=NOW)
    grown = KeptLog(CODER.name, LogRole.CODER, 1, 1, 40, "coder ran\n[REDACTED:x]\n", False)
    ledger.ship_logs("r1", [grown, JUDGE], at=NOW + timedelta(seconds=5))
    read = ledger.run_log("r1", CODER.name)
    assert read is not None
    assert (read.text, read.size, read.updated_at) == (grown.text, 40, NOW + timedelta(seconds=5))
    assert len(ledger.run_logs("r1")) == 2


def test_a_program_s_log_replaces_its_raw_streams_shipped_while_it_ran(driver: Driver) -> None:
    ledger = driver.ledger
    driver.add("t1")
    driver.start("t1", "r1")
    out, err, other = (
        KeptLog(f"attempt-1/seat-1/claude.log{s}", LogRole.CODER, 1, 1, 5, "live\n", False)
        for s in (".out", ".err", ".jsonl")
    )
    ledger.ship_logs("r1", [out, err, other], at=NOW)
    ledger.ship_logs("r1", [CODER], at=NOW)  # another program's .log: nothing of it goes
    assert len(ledger.run_logs("r1")) == 4
    final = KeptLog("attempt-1/seat-1/claude.log", LogRole.CODER, 1, 1, 9, "$ claude\n", False)
    ledger.ship_logs("r1", [final], at=NOW)
    assert [e.name for e in ledger.run_logs("r1")] == [final.name, other.name, CODER.name]


def test_a_ship_is_all_or_nothing_and_needs_its_run(driver: Driver) -> None:
    ledger = driver.ledger
    driver.add("t1")
    driver.start("t1", "r1")
    with pytest.raises(LedgerConflict):  # no such run: the foreign key refuses the batch
        ledger.ship_logs("r-none", [CODER], at=NOW)
    broken = KeptLog("attempt-1/seat-1/x.log", LogRole.CODER, 1, 1, -1, "", False)
    with pytest.raises(LedgerConflict):
        ledger.ship_logs("r1", [CODER, broken], at=NOW)
    assert ledger.run_logs("r1") == []


def test_a_deleted_task_takes_its_runs_logs_with_it(driver: Driver) -> None:
    ledger = driver.ledger
    for task_id in ("t1", "t2"):
        driver.add(task_id)
        task = driver.start(task_id, f"{task_id}-r1")
        ledger.ship_logs(f"{task_id}-r1", [CODER], at=NOW)
        ledger.close_run(driver.close_for(task, f"{task_id}-r1", Verdict(status=RunStatus.FAILED)))
    ledger.delete_tasks(["t1"])
    with ledger._engine.connect() as conn:
        left = conn.exec_driver_sql("SELECT run_id FROM run_logs").scalars().all()
    assert left == ["t2-r1"]


def test_a_0009_ledger_upgrades_to_keep_logs_and_downgrades_without_them(
    target: LedgerTarget,
) -> None:
    ledger = target.open(migrate=False)
    alembic_to(ledger, "0009")
    with ledger._engine.connect() as conn:
        assert not sa.inspect(conn).has_table("run_logs")
    assert ledger.migrate() == HEAD_REVISION
    driver = Driver(ledger)
    driver.add("t1")
    driver.start("t1", "r1")
    ledger.ship_logs("r1", [CODER], at=NOW)
    assert [e.name for e in ledger.run_logs("r1")] == [CODER.name]
    alembic_to(ledger, "0009", down=True)
    with ledger._engine.connect() as conn:
        assert not sa.inspect(conn).has_table("run_logs")
        assert conn.exec_driver_sql("SELECT count(*) FROM runs").scalar() == 1
    assert ledger.migrate() == HEAD_REVISION
    assert ledger.run_logs("r1") == []
