"""The event log: one closed vocabulary of kinds, old ledgers migrated to it, the live tail."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa
from ledger_driver import Driver, LedgerTarget, alembic_to
from pydantic import ValidationError

from assay.adapters.store import statements
from assay.adapters.store.records import EventIn
from assay.adapters.store.sql import HEAD_REVISION, Ledger
from assay.core.settle import Verdict
from assay.core.vocab import EventKind, RunStatus, SettleRow
from assay.engine.recovery.refunds import refund_streak

AT = {"at": "2026-01-01 00:00:00"}


def _kinds(ledger: Ledger) -> list[str]:
    with ledger._engine.connect() as conn:
        return list(conn.execute(sa.text("SELECT kind FROM events ORDER BY id")).scalars())


# -- the vocabulary ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["note", "run_started", "warning", "run.Started", ""])
def test_an_unknown_kind_is_refused_and_nothing_written(
    ledger: Ledger, driver: Driver, kind: str
) -> None:
    driver.add("t1")
    before = ledger.events()
    with pytest.raises(ValidationError, match="kind"):
        ledger.append_event(kind, {}, at=driver.now(), task_id="t1")
    with pytest.raises(ValidationError):
        EventIn.model_validate({"kind": kind})
    assert ledger.events() == before


def test_every_kind_is_dotted_and_written_as_its_token(ledger: Ledger, driver: Driver) -> None:
    assert all("." in kind and kind == kind.lower() for kind in EventKind)
    driver.add("t1")
    for kind in EventKind:
        ledger.append_event(kind.value, {"k": kind.name}, at=driver.now(), task_id="t1")
    stored = ledger.events("t1")[1:]
    assert [e.kind for e in stored] == list(EventKind)
    assert all(type(e.kind) is EventKind for e in stored)
    assert _kinds(ledger)[1:] == [k.value for k in EventKind]  # plain text in the database


def test_the_store_writes_its_own_events_in_the_vocabulary(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    driver.cycle("t1", "r1", RunStatus.FAILED)
    task = ledger.get_task("t1")
    task.hold("a human looks", driver.now())
    ledger.save_task(task)
    assert [e.kind for e in ledger.events("t1")] == [
        EventKind.TASK_ADDED,
        EventKind.RUN_OPENED,
        EventKind.RUN_CLOSED,
        EventKind.TASK_SAVED,
    ]


# -- old ledgers ------------------------------------------------------------------------------


def _old_ledger(target: LedgerTarget) -> Ledger:
    """A ledger at revision 0002 holding what the old spellings wrote: two refunded runs of a
    task, a warning, the graph's own ``run.started``, and a kind from a newer version."""
    ledger = target.open(migrate=False)
    alembic_to(ledger, "0002")
    run = (
        "INSERT INTO runs (id, task_id, status, settle_row, attempt_spent, task_status, reason,"
        " started_at, finished_at) VALUES (:id, 'old', 'failed', 'failed_machine_fault',"
        " false, 'failed', :reason, :at, :at)"
    )
    event = (
        "INSERT INTO events (at, task_id, run_id, kind, data)"
        " VALUES (:at, 'old', :run, :kind, '{}')"
    )
    with ledger._engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO tasks (id, title, instruction, status, created_at, updated_at) "
                "VALUES ('old', 'old task', 'do it', 'failed', :at, :at)"
            ),
            AT,
        )
        for run_id in ("r1", "r2"):
            conn.execute(sa.text(run), {"id": run_id, "reason": f"{run_id} lost", **AT})
        for run_id, kind in [
            (None, "task_added"),
            ("r1", "run_started"),
            ("r1", "run.started"),
            ("r1", "run_closed"),
            (None, "task_saved"),
            ("r2", "run_started"),
            ("r2", "warning"),
            ("r2", "run_closed"),
            ("r2", "note.from_a_newer_assay"),
        ]:
            conn.execute(sa.text(event), {"run": run_id, "kind": kind, **AT})
    return ledger


def test_migrating_rewrites_old_kinds_so_an_old_ledger_reads_the_same(
    target: LedgerTarget,
) -> None:
    ledger = _old_ledger(target)
    assert ledger.migrate() == HEAD_REVISION
    assert [e.kind for e in ledger.events("old")] == [
        EventKind.TASK_ADDED,
        EventKind.RUN_OPENED,
        EventKind.RUN_STARTED,  # the graph's event was already in the vocabulary: unchanged
        EventKind.RUN_CLOSED,
        EventKind.TASK_SAVED,
        EventKind.RUN_OPENED,
        EventKind.WARNING,
        EventKind.RUN_CLOSED,
        "note.from_a_newer_assay",  # unknown here: read back as text, never a failure
    ]
    # The refund streak reads run openings: the two old refunded runs still count.
    streak = refund_streak(ledger, "old")
    assert (streak.count, streak.faults) == (2, ("r1 lost", "r2 lost"))
    assert {r.settle_row for r in ledger.runs("old")} == {SettleRow.FAILED_MACHINE_FAULT}


def test_the_log_stays_append_only_after_the_rewrite(target: LedgerTarget) -> None:
    ledger = _old_ledger(target)
    ledger.migrate()
    before = _kinds(ledger)
    for statement in ("UPDATE events SET kind = 'x'", "DELETE FROM events"):
        with pytest.raises(sa.exc.DBAPIError, match="append-only"), ledger._engine.begin() as c:
            c.exec_driver_sql(statement)
    assert _kinds(ledger) == before


def test_a_downgrade_puts_the_old_spellings_back(target: LedgerTarget) -> None:
    ledger = _old_ledger(target)
    before = _kinds(ledger)
    ledger.migrate()
    alembic_to(ledger, "0002", down=True)
    assert _kinds(ledger) == before


# -- the live tail ----------------------------------------------------------------------------


def test_events_after_pages_through_the_log_once(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    driver.add("t2")
    for n in range(5):
        ledger.append_event(EventKind.WARNING, {"n": n}, at=driver.now(), task_id="t1")
    seen, last = [], 0
    while page := ledger.events_after(last, 2):
        assert len(page) <= 2
        seen.extend(page)
        last = page[-1].id
    assert seen == ledger.events()
    assert ledger.events_after(last, 10) == []
    mine = ledger.events_after(0, 100, task_id="t1")
    assert [e.data.get("n") for e in mine] == [None, 0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="limit"):
        ledger.events_after(0, 0)


def test_events_after_follows_a_run(ledger: Ledger, driver: Driver) -> None:
    driver.add("t1")
    driver.cycle("t1", "r1", RunStatus.FAILED)
    driver.start("t1", "r2")
    opened = ledger.events_after(0, 10, run_id="r2")
    assert [e.kind for e in opened] == [EventKind.RUN_OPENED]
    ledger.append_event(
        EventKind.DISPATCH_STARTED, {"seat": 1}, at=driver.now(), task_id="t1", run_id="r2"
    )
    tail = ledger.events_after(opened[-1].id, 10, run_id="r2")
    assert [e.kind for e in tail] == [EventKind.DISPATCH_STARTED]


def test_a_tail_never_skips_an_event_committed_late(target: LedgerTarget) -> None:
    """A writer that drew an id and has not committed holds back every later writer, so a
    reader that saw id n never finds n-1 appearing behind it (PostgreSQL draws ids outside
    commit order; SQLite has one writer)."""
    ledger = target.open()
    driver = Driver(ledger)
    driver.add("t1")
    last = ledger.events_after(0, 10)[-1].id
    slow = ledger._engine.connect()
    slow.execution_options(assay_write=True)
    slow.begin()
    statements.append_event(slow, driver.now(), EventKind.WARNING, {"n": "slow"}, "t1")
    done = threading.Event()

    def fast() -> None:
        ledger.append_event(EventKind.WARNING, {"n": "fast"}, at=driver.now(), task_id="t1")
        done.set()

    writer = threading.Thread(target=fast)
    writer.start()
    try:
        time.sleep(0.3)
        assert not done.is_set(), "a second writer committed while the first held its id"
        assert ledger.events_after(last, 10) == []
    finally:
        slow.commit()
        slow.close()
    writer.join(timeout=20)
    assert done.is_set()
    tail = ledger.events_after(last, 10)
    assert [e.data["n"] for e in tail] == ["slow", "fast"]
    assert tail[0].id < tail[1].id


def test_a_close_waits_for_an_event_drawn_before_it(target: LedgerTarget) -> None:
    """A run's close takes the event-order lock in its run update (PostgreSQL), not in a
    statement of its own: it still waits behind a writer holding an undrawn-to-commit id, and
    its events come after that writer's."""
    ledger = target.open()
    driver = Driver(ledger)
    driver.add("t1")
    driver.add("t2")
    close = driver.close_for(driver.start("t1", "r1"), "r1", Verdict(status=RunStatus.FAILED))
    slow = ledger._engine.connect()
    slow.execution_options(assay_write=True)
    slow.begin()
    statements.append_event(slow, driver.now(), EventKind.WARNING, {"n": "slow"}, "t2")
    done = threading.Event()

    def closing() -> None:
        ledger.close_run(close)
        done.set()

    closer = threading.Thread(target=closing)
    closer.start()
    try:
        time.sleep(0.3)
        assert not done.is_set(), "a close committed while another writer held its event id"
    finally:
        slow.commit()
        slow.close()
    closer.join(timeout=20)
    assert done.is_set()
    warning = ledger.events("t2")[-1]
    closed = ledger.events(run_id="r1")[-1]
    assert (warning.data, closed.kind) == ({"n": "slow"}, EventKind.RUN_CLOSED)
    assert warning.id < closed.id
