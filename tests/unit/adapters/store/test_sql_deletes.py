"""Deleting tasks from the ledger: every row of a task goes in one transaction (its runs'
attempts, dispatches, documents, events and usage too), a running task never, and the event
log stays append-only for every task that exists. On SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from ledger_driver import Driver, LedgerTarget

from assay.adapters.store import deletes
from assay.adapters.store.deletes import DeleteRefused, TaskState
from assay.adapters.store.records import EventIn, RunDocument
from assay.adapters.store.sql import HEAD_REVISION, Ledger, LedgerConflict, TaskNotFound
from assay.adapters.store.usage_log import DispatchKey
from assay.core.settle import Verdict
from assay.core.usage import UsageFigures
from assay.core.vocab import EventKind, RunStatus, UsageRole

TABLES = (
    "tasks",
    "runs",
    "attempts",
    "dispatches",
    "stage_records",
    "run_documents",
    "events",
    "usage",
    "deleting_tasks",
)


def engine_of(ledger: Ledger) -> sa.Engine:
    return ledger._engine


def rows(ledger: Ledger, task_ids: tuple[str, ...]) -> dict[str, int]:
    """Rows of each table that belong to ``task_ids`` (directly or through their runs)."""
    ids = ", ".join(f"'{i}'" for i in task_ids)
    runs = f"SELECT id FROM runs WHERE task_id IN ({ids})"
    where = {
        "tasks": f"id IN ({ids})",
        "runs": f"task_id IN ({ids})",
        "attempts": f"run_id IN ({runs})",
        "dispatches": f"run_id IN ({runs})",
        "stage_records": f"task_id IN ({ids})",
        "run_documents": f"run_id IN ({runs})",
        "events": f"task_id IN ({ids}) OR run_id IN ({runs})",
        "usage": f"task_id IN ({ids}) OR run_id IN ({runs})",
        "deleting_tasks": "1 = 1",
    }
    with engine_of(ledger).connect() as conn:
        return {
            table: int(conn.exec_driver_sql(f"SELECT count(*) FROM {table} WHERE {w}").scalar())
            for table, w in where.items()
        }


def full_task(driver: Driver, task_id: str) -> None:
    """A task with two closed runs, each with attempts, dispatches, usage, a document and an
    event of its own."""
    ledger = driver.ledger
    driver.add(task_id)
    for n in (1, 2):
        run_id = f"{task_id}-r{n}"
        task = driver.start(task_id, run_id)
        key = DispatchKey(
            task_id=task_id, run_id=run_id, dispatch="a1.s0", role=UsageRole.CODER,
            source="command", attempt=1, seat=0,
        )  # fmt: skip
        ledger.record_usage(key, UsageFigures(tokens_in=10, tokens_out=5), priced=False,
                            at=driver.now())  # fmt: skip
        ledger.append_event(EventKind.WARNING, {"n": n}, at=driver.now(), run_id=run_id)
        close = driver.close_for(
            task,
            run_id,
            Verdict(status=RunStatus.FAILED),
            events=[EventIn(kind=EventKind.WARNING, data={"closing": n})],
        )
        close = close.model_copy(update={"document": RunDocument.build({"n": n}, diff="d")})
        ledger.close_run(close)


@pytest.fixture
def two(driver: Driver) -> Iterator[Driver]:
    full_task(driver, "t1")
    full_task(driver, "t2")
    yield driver


def test_a_deleted_task_leaves_no_row_and_the_other_task_is_untouched(
    ledger: Ledger, two: Driver
) -> None:
    before = rows(ledger, ("t2",))
    assert all(before[t] for t in TABLES if t != "deleting_tasks")
    done = ledger.delete_tasks(["t1"])
    assert [t.id for t in done.deleted] == ["t1"] and done.kept == []
    (deleted,) = done.deleted
    assert [r.id for r in deleted.runs] == ["t1-r1", "t1-r2"]
    assert deleted.title == "title t1" and deleted.status == "failed"
    assert deleted.usage == 2 and deleted.events >= 6
    assert set(rows(ledger, ("t1",)).values()) == {0}
    assert rows(ledger, ("t2",)) == before
    with pytest.raises(TaskNotFound):
        ledger.get_task("t1")
    assert [t.id for t in ledger.list_tasks()] == ["t2"]
    assert ledger.usage(task_id="t1") == []


def test_the_log_stays_append_only_for_tasks_that_exist(ledger: Ledger, two: Driver) -> None:
    ledger.delete_tasks(["t1"])
    for statement in ("DELETE FROM events", "UPDATE events SET kind = 'x'"):
        with (
            pytest.raises(sa.exc.DBAPIError, match="append-only"),
            engine_of(ledger).begin() as conn,
        ):
            conn.exec_driver_sql(statement)
    assert rows(ledger, ("t2",))["events"] > 0


def test_a_running_task_is_refused_and_nothing_is_deleted(ledger: Ledger, two: Driver) -> None:
    two.add("t3")
    two.start("t3", "t3-r1")
    before = rows(ledger, ("t1", "t2", "t3"))
    with pytest.raises(DeleteRefused) as refused:
        ledger.delete_tasks(["t1", "t3", "nope"])
    assert [i for i, _ in refused.value.kept] == ["t3", "nope"]
    assert "it is running (run t3-r1 is open)" in refused.value.kept[0][1]
    assert refused.value.kept[1][1] == "no such task"
    assert rows(ledger, ("t1", "t2", "t3")) == before


def test_not_all_or_nothing_deletes_what_it_may(ledger: Ledger, two: Driver) -> None:
    two.add("t3")
    two.start("t3", "t3-r1")
    done = ledger.delete_tasks(["t1", "t3"], all_or_nothing=False)
    assert [t.id for t in done.deleted] == ["t1"]
    assert [i for i, _ in done.kept] == ["t3"]
    assert ledger.get_task("t3").status.value == "running"


def test_a_rule_is_checked_under_the_lock(ledger: Ledger, two: Driver) -> None:
    def only_t2(state: TaskState) -> str | None:
        return None if state.id == "t2" else "not this one"

    done = ledger.delete_tasks(["t1", "t2"], rule=only_t2, all_or_nothing=False)
    assert [t.id for t in done.deleted] == ["t2"] and done.kept == [("t1", "not this one")]


def test_a_dry_run_answers_the_same_and_deletes_nothing(ledger: Ledger, two: Driver) -> None:
    before = rows(ledger, ("t1", "t2"))
    dry = ledger.delete_tasks(["t1"], dry_run=True)
    assert [t.id for t in dry.deleted] == ["t1"] and len(dry.deleted[0].runs) == 2
    assert rows(ledger, ("t1", "t2")) == before


def test_many_tasks_past_one_statements_ids(
    ledger: Ledger, driver: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deletes, "IDS_PER_STATEMENT", 3)
    ids = [f"m{n}" for n in range(8)]
    for task_id in ids:
        driver.add(task_id)
        driver.cycle(task_id, f"{task_id}-r1", RunStatus.FAILED)
    done = ledger.delete_tasks(ids)
    assert sorted(t.id for t in done.deleted) == ids
    assert set(rows(ledger, tuple(ids)).values()) == {0}


def test_a_run_cannot_start_on_a_deleted_task(ledger: Ledger, driver: Driver) -> None:
    """A worker that read the task before it was deleted loses its claim, as to a rival."""
    task = driver.add("t1")
    ledger.delete_tasks(["t1"])
    task.start(driver.now(), run_id="r1")
    with pytest.raises((TaskNotFound, LedgerConflict)):
        ledger.start_run(task, "r1")


def test_the_migration_round_trips(target: LedgerTarget) -> None:
    from alembic import command
    from alembic.config import Config

    from assay.adapters.store.sql import MIGRATIONS

    ledger = target.open()
    assert ledger.revision() == HEAD_REVISION
    Driver(ledger).add("t1")  # at the head: the Ledger writes the newest columns
    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    with ledger._write() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0007")
    assert ledger.revision() == "0007"
    with (
        pytest.raises(sa.exc.DBAPIError, match="append-only"),
        engine_of(ledger).begin() as conn,
    ):
        conn.exec_driver_sql("DELETE FROM events")
    assert ledger.migrate() == HEAD_REVISION
    assert [t.id for t in ledger.delete_tasks(["t1"]).deleted] == ["t1"]
