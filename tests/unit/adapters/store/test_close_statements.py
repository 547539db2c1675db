"""A run's close costs a fixed, small number of statements, however much it records.

Counted at the driver on both backends (SQLAlchemy's ``before_cursor_execute``, and each call
the close makes on the SQLite driver itself): a change that adds a round trip per close, or
one per attempt, dispatch or event, fails here by name.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from ledger_driver import BENCH_WAVES, Driver, LedgerTarget, Wave

from assay.adapters.store import driver as store_driver
from assay.adapters.store import run_writes
from assay.adapters.store import statements as st
from assay.adapters.store.batch import Rows
from assay.adapters.store.errors import LedgerConflict, LedgerError, RunNotFound, TaskNotFound
from assay.adapters.store.records import EventIn, RunClose, RunDocument
from assay.adapters.store.schema import metadata, runs, tasks
from assay.adapters.store.sql import Ledger
from assay.core.settle import Verdict
from assay.core.tasks import Task
from assay.core.vocab import AttemptOutcome, EventKind, RunStatus, Stage

CLOSE = [
    "UPDATE tasks",  # the task's lock and row, RETURNING its spent attempts
    "UPDATE runs",  # the run's lock, check and close, RETURNING the closed row
]
"""The statements of one close that come before its rows."""
ROWS = ["stage_records", "attempts", "dispatches", "run_documents", "events"]
"""The tables a close with documents writes rows into, in order, the events last."""


def expected(backend: str) -> list[str]:
    """SQLite: the two updates, then one insert per table (a statement there is no round
    trip). PostgreSQL: all of it in one statement, named by the tables it writes in order."""
    # Then the task's run time, summed again from its closed runs (task_totals).
    if backend == "postgresql":
        return [" ".join(["WITH", *CLOSE, *(f"INSERT {table}" for table in ROWS)]), "UPDATE tasks"]
    return ["BEGIN IMMEDIATE", *CLOSE, *(f"INSERT INTO {table}" for table in ROWS), "UPDATE tasks"]


class _NotingDriver:
    """A DBAPI connection that notes each statement given to it, once per call."""

    def __init__(self, connection: Any, seen: list[str]) -> None:
        self._connection = connection
        self._seen = seen

    def execute(self, statement: str, *args: Any) -> Any:
        self._seen.append(_head(statement))
        return self._connection.execute(statement, *args)

    def executemany(self, statement: str, *args: Any) -> Any:
        self._seen.append(_head(statement))
        return self._connection.executemany(statement, *args)


@contextmanager
def counted(ledger: Ledger) -> Iterator[list[str]]:
    """Each statement the ledger's engine sends while inside, as its first words."""
    seen: list[str] = []

    def note(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        seen.append(_head(statement))

    engine = ledger._engine
    sa.event.listen(engine, "before_cursor_execute", note)
    on_driver = store_driver._driver
    store_driver._driver = lambda conn: _NotingDriver(on_driver(conn), seen)  # type: ignore[assignment]
    try:
        yield seen
    finally:
        store_driver._driver = on_driver  # type: ignore[assignment]
        sa.event.remove(engine, "before_cursor_execute", note)


def _head(statement: str) -> str:
    words = statement.replace("(", " ").split()
    if words[0] == "WITH":
        # Named by the tables it writes, in order (an upsert's DO UPDATE is no table).
        written = [
            f"UPDATE {words[n + 1]}" if word == "UPDATE" else f"INSERT {words[n + 2]}"
            for n, word in enumerate(words)
            if word == "INSERT" or (word == "UPDATE" and words[n - 1] != "DO")
        ]
        return " ".join(["WITH", *written])
    if words[0] == "SELECT":
        # A select is named by what it reads: its first table, or the function it calls.
        table = words[words.index("FROM") + 1] if "FROM" in words else words[1]
        return f"SELECT {table.split('.')[0]}"
    if words[0] == "BEGIN":
        return " ".join(words[:2])
    return " ".join(words[:3] if words[0] == "INSERT" else words[:2])


def close_with_everything(driver: Driver, task: Task, run_id: str, waves: list[Wave]) -> RunClose:
    events = [EventIn(kind=EventKind.WARNING, data={"n": n}) for n in range(len(waves))]
    close = driver.close_for(
        task,
        run_id,
        Verdict(status=RunStatus.FAILED),
        waves,
        max_attempts=10,
        judge_calls=2,
        land_attempts=1,
        events=events,
    )
    document = RunDocument.build({"run": run_id}, diff="+1\n", halt_states={"halts": []})
    return close.model_copy(update={"document": document})


def test_a_close_is_a_fixed_handful_of_statements(target: LedgerTarget) -> None:
    ledger = target.open()
    driver = Driver(ledger)
    driver.add("t1")
    small = close_with_everything(driver, driver.start("t1", "r1"), "r1", list(BENCH_WAVES))
    with counted(ledger) as seen:
        ledger.close_run(small)
    assert seen == expected(target.backend)

    # Four times the attempts, three times the dispatches, more events: not one more statement.
    waves = [Wave(AttemptOutcome.BLOCKED, 3, (f"test_{n} failed",)) for n in range(11)]
    waves.append(Wave(AttemptOutcome.PASSED, 3))
    big = close_with_everything(driver, driver.start("t1", "r2"), "r2", waves)
    with counted(ledger) as seen:
        closed = ledger.close_run(big)
    assert seen == expected(target.backend)

    # And all of it was written: rows, counters, events in order.
    assert closed.finished_at is not None and not closed.open
    assert [a.attempt for a in ledger.attempts("r2")] == list(range(1, 13))
    assert all(a.coder_dispatches == 3 for a in ledger.attempts("r2"))
    assert len(ledger.dispatches("r2")) == 36
    view = ledger.ledger("t1")
    assert view.attempts(Stage.DISPATCH) == 4 + 36
    assert view.attempts(Stage.RECOVER) == 2 + 11
    assert view.attempts(Stage.JUDGE) == 4 and view.attempts(Stage.LAND) == 2
    assert view.attempts(Stage.TASK) == 2
    opened, *logged = ledger.events(run_id="r2")
    assert opened.kind is EventKind.RUN_OPENED
    assert [e.kind for e in logged] == [EventKind.WARNING] * 12 + [EventKind.RUN_CLOSED]
    assert [e.data.get("n") for e in logged[:-1]] == list(range(12))
    ids = [e.id for e in logged]
    assert ids == sorted(set(ids))  # appended in the order given, one id each
    assert ledger.run_document("r2") == big.document


def test_a_refused_close_is_explained_and_writes_nothing(target: LedgerTarget) -> None:
    """The run's check is its UPDATE: when it matches nothing, one more read says why."""
    ledger = target.open()
    driver = Driver(ledger)
    driver.add("t1")
    close = close_with_everything(driver, driver.start("t1", "r1"), "r1", list(BENCH_WAVES))
    ledger.close_run(close)
    before = len(ledger.events())
    with counted(ledger) as seen, pytest.raises(LedgerConflict, match="r1' is already closed"):
        ledger.close_run(close)
    # PostgreSQL: the one statement, its inserts gated on the run's update, wrote no row.
    refused = expected(target.backend)[:1] if target.backend == "postgresql" else CLOSE
    assert seen[-len(refused) - 1 :] == [*refused, "SELECT runs"]
    assert len(ledger.events()) == before


def _every_row(ledger: Ledger) -> dict[str, list[tuple[object, ...]]]:
    with ledger.read() as conn:
        return {
            name: sorted((tuple(r) for r in conn.execute(sa.select(table))), key=repr)
            for name, table in metadata.tables.items()
        }


def test_every_refused_close_writes_nothing(target: LedgerTarget) -> None:
    """Each check a close makes refuses it whole, on both backends: on PostgreSQL the task's
    update and the rows' inserts share one statement with the failed check, and are undone."""
    ledger = target.open()
    driver = Driver(ledger)
    driver.add("t1")
    driver.add("t2")
    close = close_with_everything(driver, driver.start("t1", "r1"), "r1", list(BENCH_WAVES))
    other = close_with_everything(driver, driver.start("t2", "r2"), "r2", list(BENCH_WAVES))
    ghost = close.task.model_copy(update={"id": "ghost"})
    miscounted = close.task.model_copy(update={"attempts": 0})
    refused: list[tuple[RunClose, type[LedgerError], str]] = [
        (close.model_copy(update={"task": miscounted}), LedgerConflict, "expected 1"),
        (close.model_copy(update={"run_id": "nope"}), RunNotFound, "no run 'nope'"),
        (close.model_copy(update={"run_id": "r2"}), LedgerConflict, "belongs to task 't2'"),
        (close.model_copy(update={"task": ghost}), TaskNotFound, "no task 'ghost'"),
    ]
    before = _every_row(ledger)
    for bad, error, message in refused:
        with pytest.raises(error, match=message):
            ledger.close_run(bad)
        assert _every_row(ledger) == before, message
    ledger.close_run(other)
    ledger.close_run(close)
    after = _every_row(ledger)
    with pytest.raises(LedgerConflict, match="already closed"):
        ledger.close_run(close)
    assert _every_row(ledger) == after


def test_sqlite_stores_a_close_as_sqlalchemy_would(target: LedgerTarget) -> None:
    """The close's statements skip SQLAlchemy's execution machinery, not its types: every row
    it writes is stored byte for byte as SQLAlchemy's own insert of the same values stores it."""
    if target.backend != "sqlite":
        pytest.skip("PostgreSQL types the values itself (the round-trip tests read them back)")
    ledger = target.open()
    driver = Driver(ledger)
    driver.add("t1")
    close = close_with_everything(driver, driver.start("t1", "r1"), "r1", list(BENCH_WAVES))
    ledger.close_run(close)
    settled = {"id": "t1", **st.task_values(close.task)}
    started = ledger.get_run("r1").started_at
    closed = {"id": "r1", "task_id": "t1", "started_at": started} | run_writes.run_values(close)
    # The stage counters are left out: the close adds to what the run's start stored.
    parts = [p for p in run_writes.row_parts(close) if p.rows and p.table.name != "stage_records"]
    assert [p.table.name for p in parts] == ["attempts", "dispatches", "run_documents", "events"]
    parts += [Rows(tasks, [settled]), Rows(runs, [closed])]
    reference = sa.create_engine("sqlite://")
    metadata.create_all(reference)
    for part in parts:
        query = f"SELECT {', '.join(part.rows[0])} FROM {part.table.name}"
        with ledger.read() as conn:
            opened = " WHERE kind NOT IN ('task.added', 'run.opened')"  # not the close's
            where = opened if part.table.name == "events" else ""
            stored = conn.exec_driver_sql(f"{query}{where} ORDER BY rowid").all()
        with reference.begin() as conn:
            conn.execute(sa.insert(part.table), list(part.rows))
            expected = conn.exec_driver_sql(f"{query} ORDER BY rowid").all()
        assert stored == expected, part.table.name
        assert [type(v) for v in stored[0]] == [type(v) for v in expected[0]], part.table.name
    reference.dispose()
