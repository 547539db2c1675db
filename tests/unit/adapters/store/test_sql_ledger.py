"""The SQL ledger: schema, round trips, run closes, derived counters and the event log."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from ledger_driver import BENCH_WAVES, Driver, LedgerTarget, Wave

from assay.adapters.store import run_writes
from assay.adapters.store.connect import default_url, make_engine
from assay.adapters.store.records import EventIn, RunClose
from assay.adapters.store.schema import metadata
from assay.adapters.store.sql import (
    HEAD_REVISION,
    Ledger,
    LedgerConflict,
    RunNotFound,
    TaskNotFound,
)
from assay.core.ledger import ConvergenceLedger
from assay.core.settle import Verdict
from assay.core.tasks import Task
from assay.core.vocab import (
    AttemptOutcome,
    EventKind,
    HoldSource,
    RunStatus,
    SettleRow,
    Stage,
    StageVerdict,
    TaskStatus,
)

TABLES = ("tasks", "runs", "attempts", "dispatches", "stage_records", "events")


def engine_of(ledger: Ledger) -> sa.Engine:
    return ledger._engine


def snapshot(ledger: Ledger) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every ledger table, for before/after comparisons."""
    with engine_of(ledger).connect() as conn:
        return {
            name: sorted(
                (tuple(row) for row in conn.execute(sa.select(metadata.tables[name]))), key=repr
            )
            for name in TABLES
        }


# -- schema -----------------------------------------------------------------------------------


def test_migrate_creates_schema_from_empty(target: LedgerTarget) -> None:
    ledger = target.open(migrate=False)
    assert ledger.revision() is None
    assert ledger.migrate() == HEAD_REVISION
    names = set(sa.inspect(engine_of(ledger)).get_table_names())
    assert set(TABLES) <= names


def test_migrate_is_idempotent(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    before = snapshot(ledger)
    assert ledger.migrate() == HEAD_REVISION
    assert ledger.migrate() == HEAD_REVISION
    assert snapshot(ledger) == before


def test_migrations_match_the_metadata(ledger: Ledger) -> None:
    with engine_of(ledger).connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    # PostgreSQL's trigram indexes for the queue's search are made only where pg_trgm can be.
    kept = [d for d in diff if not (d[0] == "remove_index" and d[1].name.endswith("_trgm"))]
    assert kept == []


def test_tasks_table_holds_no_counter(ledger: Ledger) -> None:
    columns = {c["name"] for c in sa.inspect(engine_of(ledger)).get_columns("tasks")}
    assert "attempts" not in columns
    assert "run_ids" not in columns


def test_default_url_follows_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.delenv("ASSAY_DATABASE_URL", raising=False)
    monkeypatch.setenv("ASSAY_HOME", str(tmp_path / "home"))
    assert default_url() == f"sqlite:///{tmp_path / 'home' / 'assay.db'}"
    monkeypatch.delenv("ASSAY_HOME")
    monkeypatch.chdir(tmp_path)
    assert default_url() == f"sqlite:///{tmp_path / '.assay' / 'assay.db'}"
    monkeypatch.setenv("ASSAY_DATABASE_URL", "postgresql+psycopg://u@h/db")
    assert default_url() == "postgresql+psycopg://u@h/db"


def test_default_ledger_is_sqlite_in_wal(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.delenv("ASSAY_DATABASE_URL", raising=False)
    monkeypatch.delenv("ASSAY_DB_TIMEOUT", raising=False)
    monkeypatch.setenv("ASSAY_HOME", str(tmp_path / "h"))
    with Ledger.open() as ledger, engine_of(ledger).connect() as conn:
        assert (tmp_path / "h" / "assay.db").exists()
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 15_000


def test_engine_rejects_what_it_cannot_serve(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="unsupported"):
        make_engine("mysql://u@h/db")
    with pytest.raises(ValueError, match="PostgreSQL option"):
        make_engine(f"sqlite:///{tmp_path / 'x.db'}", schema="s")
    with pytest.raises(ValueError, match="invalid schema"):
        make_engine("postgresql+psycopg://u@h/db", schema="x; DROP TABLE tasks")


# -- tasks ------------------------------------------------------------------------------------


def test_task_round_trip(ledger: Ledger, driver: Driver) -> None:
    task = Task.new(id="t1", title="Keep digits", instruction="slugify", now=driver.now())
    task.diagnostic = "note"
    ledger.add_task(task)
    assert ledger.get_task("t1") == task
    assert ledger.list_tasks() == [task]


def test_list_tasks_orders_and_filters(ledger: Ledger, driver: Driver) -> None:
    for name in ("b", "a", "c"):
        driver.add(name)
    driver.cycle("a", "r1")
    assert [t.id for t in ledger.list_tasks()] == ["b", "a", "c"]
    assert [t.id for t in ledger.list_tasks(TaskStatus.FAILED)] == ["a"]
    assert [t.id for t in ledger.list_tasks(TaskStatus.QUEUED)] == ["b", "c"]


def test_unknown_and_duplicate_tasks(ledger: Ledger, driver: Driver) -> None:
    with pytest.raises(TaskNotFound):
        ledger.get_task("nope")
    with pytest.raises(TaskNotFound):
        ledger.ledger("nope")
    task = driver.add("t1")
    with pytest.raises(LedgerConflict):
        ledger.add_task(task)
    with pytest.raises(ValueError, match="no runs yet"):
        ledger.add_task(task.model_copy(update={"id": "t2", "run_ids": ["r0"]}))


# -- runs -------------------------------------------------------------------------------------


def test_close_records_everything(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    task = driver.start("t1", "r1")
    close = driver.close_for(
        task,
        "r1",
        Verdict(status=RunStatus.MERGED),
        BENCH_WAVES,
        judge_calls=2,
        land_attempts=1,
        events=[EventIn(kind=EventKind.HALT_FIRED, data={"name": "halt-budget-exhausted"})],
    )
    closed = ledger.close_run(close)
    assert closed == ledger.get_run("r1")
    assert (closed.status, closed.settle_row, closed.attempt_spent) == (
        RunStatus.MERGED,
        SettleRow.SUCCEEDED,
        True,
    )
    assert closed.payload_path == "runs/r1/payload.json"
    loaded = ledger.get_task("t1")
    assert loaded == close.task
    assert (loaded.status, loaded.attempts, loaded.run_ids) == (TaskStatus.DONE, 1, ["r1"])
    assert ledger.attempts("r1") == close.attempts
    assert ledger.dispatches("r1") == close.dispatches
    kinds = [e.kind for e in ledger.events("t1")]
    assert kinds == ["task.added", "run.opened", "halt.fired", "run.closed"]


def test_refund_gives_the_attempt_back(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    driver.cycle("t1", "r1", verdict=Verdict(status=RunStatus.STALLED, quota_hit=True))
    assert ledger.get_task("t1").attempts == 0
    assert ledger.get_run("r1").attempt_spent is False
    driver.cycle("t1", "r2", RunStatus.FAILED)
    assert ledger.get_task("t1").attempts == 1
    assert ledger.get_task("t1").run_ids == ["r1", "r2"]


def test_spent_out_task_is_held(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    for n in range(3):
        driver.cycle("t1", f"r{n}", RunStatus.FAILED, max_attempts=3)
    task = ledger.get_task("t1")
    assert (task.status, task.hold_source, task.attempts) == (
        TaskStatus.HELD,
        HoldSource.MACHINE,
        3,
    )
    assert ledger.ledger("t1").stage_state["task"].last_verdict is StageVerdict.ESCALATE


def test_counters_are_derived_from_stage_records(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    driver.cycle("t1", "r1", RunStatus.FAILED, BENCH_WAVES, judge_calls=3, land_attempts=0)
    driver.cycle("t1", "r2", RunStatus.MERGED, [Wave(AttemptOutcome.PASSED, 2)], land_attempts=1)
    view = ledger.ledger("t1")
    assert {stage: view.attempts(stage) for stage in Stage} == {
        Stage.TASK: 2,
        Stage.RECOVER: 2,
        Stage.DISPATCH: 6,
        Stage.JUDGE: 3,
        Stage.LAND: 1,
    }
    assert ledger.get_task("t1").attempts == view.attempts(Stage.TASK)
    assert view.converged
    assert view.laps == 4
    assert view.lap_signatures == [["test_a failed"], ["test_b failed"], [], []]
    assert view.stage_state["recover"].last_verdict is StageVerdict.ADVANCE
    with engine_of(ledger).connect() as conn:
        stored = conn.execute(sa.text("SELECT count(*) FROM stage_records")).scalar()
    assert stored == len(Stage)


def test_ledger_sees_oscillation_across_runs(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    driver.cycle("t1", "r1", RunStatus.FAILED, [Wave(findings=["x  failed"])], max_attempts=9)
    assert not ledger.ledger("t1").oscillating
    driver.cycle("t1", "r2", RunStatus.FAILED, [Wave(findings=["y"])], max_attempts=9)
    driver.cycle("t1", "r3", RunStatus.FAILED, [Wave(findings=["x failed"])], max_attempts=9)
    view = ledger.ledger("t1")
    assert view.oscillating
    assert view == ConvergenceLedger.model_validate_json(view.model_dump_json())


def test_open_runs_are_the_unclosed_ones(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    driver.add("t2")
    driver.cycle("t1", "r1", RunStatus.FAILED)
    driver.start("t2", "r2")
    assert [run.id for run in ledger.open_runs()] == ["r2"]


def test_start_run_claims_the_task(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    first = ledger.get_task("t1")
    second = ledger.get_task("t1")
    first.start(driver.now(), run_id="r1")
    second.start(driver.now(), run_id="r2")
    ledger.start_run(first, "r1")
    with pytest.raises(LedgerConflict, match="not runnable"):
        ledger.start_run(second, "r2")
    assert [r.id for r in ledger.runs("t1")] == ["r1"]
    with pytest.raises(ValueError, match="start"):
        ledger.start_run(ledger.get_task("t1").model_copy(update={"status": "queued"}), "r3")


def test_start_run_refuses_a_stale_count(ledger: Ledger, driver: Driver) -> None:
    task = driver.add("t1")
    task.start(driver.now())
    task.attempts = 5
    with pytest.raises(LedgerConflict, match="ledger holds 0"):
        ledger.start_run(task, "r1")
    assert ledger.runs("t1") == []


def test_close_refuses_mismatched_attempts(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    task = driver.start("t1", "r1")
    close = driver.close_for(task, "r1", Verdict(status=RunStatus.FAILED))
    before = snapshot(ledger)
    bad = close.model_copy(update={"task": close.task.model_copy(update={"attempts": 0})})
    with pytest.raises(LedgerConflict, match="expected 1"):
        ledger.close_run(bad)
    assert snapshot(ledger) == before
    ledger.close_run(close)
    with pytest.raises(LedgerConflict, match="already closed"):
        ledger.close_run(close)
    with pytest.raises(RunNotFound):
        ledger.close_run(close.model_copy(update={"run_id": "nope"}))


def test_close_of_another_tasks_run_is_refused(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    driver.add("t2")
    driver.start("t1", "r1")
    task2 = driver.start("t2", "r2")
    close = driver.close_for(task2, "r1", Verdict(status=RunStatus.FAILED))
    with pytest.raises(LedgerConflict, match="belongs to task 't1'"):
        ledger.close_run(close)


def test_run_close_validates_its_parts(driver: Driver) -> None:
    driver.add("t1")
    task = driver.start("t1", "r1")
    close = driver.close_for(task, "r1", Verdict(status=RunStatus.FAILED), BENCH_WAVES)
    data = close.model_dump()
    with pytest.raises(ValueError, match="declares 2 coder dispatches"):
        RunClose.model_validate({**data, "dispatches": data["dispatches"][1:]})
    with pytest.raises(ValueError, match="without gaps"):
        RunClose.model_validate({**data, "attempts": data["attempts"][1:]})
    with pytest.raises(ValueError, match="settle said"):
        RunClose.model_validate({**data, "task": {**data["task"], "status": "done"}})
    with pytest.raises(ValueError, match="repeat"):
        twice = [data["dispatches"][0], {**data["dispatches"][1], "dispatch_id": "r1-a1-s0"}]
        RunClose.model_validate({**data, "dispatches": twice + data["dispatches"][2:]})


# -- atomicity --------------------------------------------------------------------------------


def test_close_is_atomic_on_a_constraint_violation(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    driver.cycle("t1", "r1", RunStatus.FAILED, BENCH_WAVES)
    task = driver.start("t1", "r2")
    close = driver.close_for(task, "r2", Verdict(status=RunStatus.MERGED), BENCH_WAVES)
    # The last dispatch reuses an id already in the ledger: the close fails on its final
    # dispatch row, after the task, stage, attempt and earlier dispatch writes.
    dispatches = [
        *close.dispatches[:-1],
        close.dispatches[-1].model_copy(update={"dispatch_id": "r1-a3-s0"}),
    ]
    clash = close.model_copy(update={"dispatches": dispatches})
    before = snapshot(ledger)
    with pytest.raises(LedgerConflict):
        ledger.close_run(clash)
    assert snapshot(ledger) == before
    assert ledger.get_run("r2").open
    ledger.close_run(close)
    assert ledger.get_task("t1").status is TaskStatus.DONE


def test_close_is_atomic_when_a_step_raises(
    ledger: Ledger, driver: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver.add("t1")
    task = driver.start("t1", "r1")
    close = driver.close_for(task, "r1", Verdict(status=RunStatus.MERGED), BENCH_WAVES)
    before = snapshot(ledger)

    write = run_writes.close_run

    def boom(*args: Any) -> None:
        write(*args)  # every statement of the close sent, then the failure before the commit
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(run_writes, "close_run", boom)
    with pytest.raises(RuntimeError, match="disk on fire"):
        ledger.close_run(close)
    assert snapshot(ledger) == before
    monkeypatch.undo()
    ledger.close_run(close)
    assert len(ledger.attempts("r1")) == 3


# -- operator moves ---------------------------------------------------------------------------


def test_save_task_hold_and_release(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    driver.cycle(
        "t1", "r1", RunStatus.BLOCKED, verdict=Verdict(status=RunStatus.BLOCKED, left_pr=True)
    )
    held = ledger.get_task("t1")
    assert (held.status, held.attempts) == (TaskStatus.HELD, 1)
    held.release(driver.now())
    ledger.save_task(held)
    released = ledger.get_task("t1")
    assert released == held
    assert released.attempts == 0
    view = ledger.ledger("t1")
    assert view.attempts(Stage.TASK) == 0
    assert view.stage_state["task"].last_verdict is StageVerdict.ESCALATE  # history kept
    released.hold("wait for review", driver.now())
    ledger.save_task(released)
    assert ledger.get_task("t1").hold_source is HoldSource.MANUAL


def test_save_task_guards_the_counter(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    driver.cycle("t1", "r1", RunStatus.FAILED)
    task = ledger.get_task("t1")
    task.attempts = 2
    with pytest.raises(LedgerConflict, match="can only be reset"):
        ledger.save_task(task)
    running = driver.start("t1", "r2")
    with pytest.raises(LedgerConflict, match="open"):
        ledger.save_task(running)
    with pytest.raises(TaskNotFound):
        ledger.save_task(running.model_copy(update={"id": "ghost"}))


# -- events -----------------------------------------------------------------------------------


def test_events_are_append_only(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    first = ledger.append_event(EventKind.WARNING, {"n": 1}, at=driver.now(), task_id="t1")
    second = ledger.append_event(EventKind.WARNING, {"n": 2}, at=driver.now())
    assert second > first
    assert [e.data for e in ledger.events("t1")] == [{"status": "queued"}, {"n": 1}]
    assert [e.id for e in ledger.events()] == sorted(e.id for e in ledger.events())
    before = snapshot(ledger)
    for statement in ("UPDATE events SET kind = 'x'", "DELETE FROM events"):
        with (
            pytest.raises(sa.exc.DBAPIError, match="append-only"),
            engine_of(ledger).begin() as conn,
        ):
            conn.exec_driver_sql(statement)
    assert snapshot(ledger) == before


def test_events_filter_by_run(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    driver.cycle("t1", "r1", RunStatus.FAILED)
    driver.cycle("t1", "r2", RunStatus.FAILED)
    assert [e.kind for e in ledger.events(run_id="r2")] == ["run.opened", "run.closed"]
    closed = ledger.events("t1", run_id="r1")[-1]
    assert closed.data["status"] == "failed"
    assert closed.data["settle_row"] == "stalled_or_failed"


def test_head_revision_constant_is_alembic_head() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from assay.adapters.store.sql import MIGRATIONS

    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    assert ScriptDirectory.from_config(config).get_current_head() == HEAD_REVISION
