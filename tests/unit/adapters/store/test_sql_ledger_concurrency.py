"""The SQL ledger under concurrent writers and a process that dies mid-close."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from ledger_driver import BENCH_WAVES, Driver, LedgerTarget, work

from assay.adapters.store import statements
from assay.adapters.store.sql import HEAD_REVISION, Ledger, LedgerConflict
from assay.core.settle import Verdict
from assay.core.vocab import EventKind, RunStatus, Stage, TaskStatus

HERE = Path(__file__).resolve().parents[3] / "support"
DRIVER = HERE / "ledger_driver.py"
TASKS, RUNS = 2, 15


def assert_worker_totals(ledger: Ledger, prefixes: list[str]) -> None:
    """Every run of every worker closed, and every counter exact."""
    for prefix in prefixes:
        for t in range(TASKS):
            task_id = f"{prefix}-t{t}"
            view = ledger.ledger(task_id)
            assert ledger.get_task(task_id).attempts == RUNS
            assert {stage: view.attempts(stage) for stage in Stage} == {
                Stage.TASK: RUNS,
                Stage.RECOVER: 2 * RUNS,
                Stage.DISPATCH: 4 * RUNS,
                Stage.JUDGE: RUNS,
                Stage.LAND: 0,
            }
            assert view.laps == 3 * RUNS
            runs = ledger.runs(task_id)
            assert len(runs) == RUNS
            assert not any(run.open for run in runs)
            assert len(ledger.events(task_id)) == 1 + 2 * RUNS


def test_threads_lose_no_update(target: LedgerTarget) -> None:
    target.open()
    prefixes = ["a", "b", "c"]
    errors: list[BaseException] = []

    def run(prefix: str) -> None:
        try:
            work(target.url, target.schema, prefix, TASKS, RUNS)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(p,)) for p in prefixes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert_worker_totals(target.open(), prefixes)


def test_processes_lose_no_update(target: LedgerTarget) -> None:
    target.open()
    prefixes = ["p", "q"]
    procs = [
        subprocess.Popen(
            [sys.executable, str(DRIVER), target.url, target.schema or "", p, str(TASKS), str(RUNS)]
        )
        for p in prefixes
    ]
    assert [proc.wait(timeout=120) for proc in procs] == [0, 0]
    assert_worker_totals(target.open(), prefixes)


def test_one_of_many_racing_starts_wins(target: LedgerTarget) -> None:
    ledger = target.open()
    driver = Driver(ledger)
    driver.add("t1")
    copies = [ledger.get_task("t1") for _ in range(6)]
    for n, copy in enumerate(copies):
        copy.start(driver.now(), run_id=f"r{n}")
    barrier = threading.Barrier(len(copies))
    outcomes: list[str] = []

    def start(n: int) -> None:
        own = target.open(migrate=False)
        barrier.wait()
        try:
            own.start_run(copies[n], f"r{n}")
            outcomes.append("won")
        except LedgerConflict:
            outcomes.append("lost")
        except BaseException as exc:
            outcomes.append(repr(exc))

    threads = [threading.Thread(target=start, args=(n,)) for n in range(len(copies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["lost"] * (len(copies) - 1) + ["won"]
    assert len(ledger.runs("t1")) == 1
    assert ledger.get_task("t1").attempts == 1


def test_one_of_many_racing_closes_of_a_run_wins(target: LedgerTarget) -> None:
    """The run's close is one guarded UPDATE: racing closes of one run (a worker and a
    recovery, say) write it once, and the losers are told it is closed."""
    ledger = target.open()
    driver = Driver(ledger)
    driver.add("t1")
    close = driver.close_for(driver.start("t1", "r1"), "r1", Verdict(status=RunStatus.FAILED))
    racers = 6
    barrier = threading.Barrier(racers)
    outcomes: list[str] = []

    def finish() -> None:
        own = target.open(migrate=False)
        barrier.wait()
        try:
            own.close_run(close)
            outcomes.append("won")
        except LedgerConflict as exc:
            outcomes.append("lost" if "already closed" in str(exc) else repr(exc))
        except BaseException as exc:
            outcomes.append(repr(exc))

    threads = [threading.Thread(target=finish) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["lost"] * (racers - 1) + ["won"]
    assert [e.kind for e in ledger.events(run_id="r1")].count("run.closed") == 1
    assert len(ledger.attempts("r1")) == 1
    assert ledger.ledger("t1").attempts(Stage.DISPATCH) == 1


CRASH = """
import os, sys
sys.path.insert(0, {here!r})
from assay.adapters.store import run_writes, sql
from assay.adapters.store.records import RunClose

close = RunClose.model_validate_json(open({close!r}).read())
ledger = sql.Ledger({url!r}, schema={schema!r})
write = run_writes.close_run

def die_before_the_commit(conn, close):
    write(conn, close)  # every statement of the close sent
    os._exit(3)  # no rollback, no cleanup: as close to pulling the plug as a test gets

run_writes.close_run = die_before_the_commit
ledger.close_run(close)
"""


def test_a_crash_mid_close_leaves_nothing(target: LedgerTarget, tmp_path: Path) -> None:
    ledger = target.open()
    driver = Driver(ledger)
    driver.add("t1")
    task = driver.start("t1", "r1")
    close = driver.close_for(task, "r1", Verdict(status=RunStatus.MERGED), BENCH_WAVES)
    (tmp_path / "close.json").write_text(close.model_dump_json())
    with ledger._engine.connect() as conn:
        counts_before = _counts(conn)
    script = CRASH.format(
        here=str(HERE), close=str(tmp_path / "close.json"), url=target.url, schema=target.schema
    )
    assert subprocess.run([sys.executable, "-c", script], check=False, timeout=60).returncode == 3
    after = target.open()
    with after._engine.connect() as conn:
        assert _counts(conn) == counts_before
    assert after.get_task("t1").status is TaskStatus.RUNNING
    assert after.get_run("r1").open
    after.close_run(close)
    assert after.get_task("t1").status is TaskStatus.DONE
    assert len(after.dispatches("r1")) == 4


def _counts(conn: sa.Connection) -> dict[str, int]:
    return {
        name: conn.execute(sa.text(f"SELECT count(*) FROM {name}")).scalar_one()
        for name in ("attempts", "dispatches", "events", "stage_records")
    }


@pytest.mark.parametrize("attempt_spent", [True, False])
def test_task_stage_equals_what_settle_decided(target: LedgerTarget, attempt_spent: bool) -> None:
    ledger = target.open()
    driver = Driver(ledger)
    driver.add("t1")
    verdict = (
        Verdict(status=RunStatus.FAILED)
        if attempt_spent
        else Verdict(status=RunStatus.FAILED, quota_hit=True, no_viable_candidates=True)
    )
    for n in range(3):
        driver.cycle("t1", f"r{n}", verdict=verdict, max_attempts=10)
    assert ledger.ledger("t1").attempts(Stage.TASK) == (3 if attempt_spent else 0)
    assert all(run.attempt_spent is attempt_spent for run in ledger.runs("t1"))


def test_concurrent_migrations_apply_once(target: LedgerTarget) -> None:
    ledgers = [target.open(migrate=False) for _ in range(4)]
    barrier = threading.Barrier(len(ledgers))
    results: list[str | None] = []

    def migrate(ledger: Ledger) -> None:
        barrier.wait()
        try:
            results.append(ledger.migrate())
        except BaseException as exc:
            results.append(repr(exc))

    threads = [threading.Thread(target=migrate, args=(ledger,)) for ledger in ledgers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [HEAD_REVISION] * len(ledgers)


def test_a_start_and_an_event_of_its_task_never_deadlock(target: LedgerTarget) -> None:
    """A writer holding the event-order lock, about to append an event of a task, and a start
    of that task holding the task's lock and waiting for the event-order lock: the task's lock
    leaves the event's foreign-key check free (PostgreSQL: ``FOR NO KEY UPDATE``), so the
    event goes in, and the start follows once it commits, instead of one of them dying."""
    if target.backend != "postgresql":
        pytest.skip("SQLite has one writer at a time: the second waits at BEGIN IMMEDIATE")
    ledger = target.open()
    driver = Driver(ledger)
    driver.add("t1")
    task = ledger.get_task("t1")
    task.start(driver.now(), run_id="r1")
    slow = ledger._engine.connect()
    slow.begin()
    statements.hold_event_order(slow)
    outcome: list[str] = []

    def start() -> None:
        try:
            ledger.start_run(task, "r1")
            outcome.append("started")
        except BaseException as exc:
            outcome.append(repr(exc))

    starter = threading.Thread(target=start)
    starter.start()
    try:
        time.sleep(0.3)  # the start now holds the task and waits for the event-order lock
        statements.append_event(slow, driver.now(), EventKind.WARNING, {"n": 1}, "t1")
        slow.commit()
    finally:
        slow.close()
    starter.join(timeout=20)
    assert outcome == ["started"]
    assert [e.kind for e in ledger.events("t1")][-2:] == [EventKind.WARNING, EventKind.RUN_OPENED]
