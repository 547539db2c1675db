"""A task's repository and branch (revision 0009): kept and read back on every backend, NULL
for the tasks queued before, and a worker's pick by repository."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from ledger_driver import LedgerTarget, alembic_to

from assay.adapters.store.schema import tasks
from assay.adapters.store.sql import HEAD_REVISION
from assay.core.tasks import Task

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def test_a_task_s_repository_and_branch_round_trip(target: LedgerTarget) -> None:
    ledger = target.open()
    placed = Task.new(
        id="t1", title="t", instruction="i", now=NOW, repository="github.com/o/r", branch="dev"
    )
    ledger.add_task(placed)
    ledger.add_task(Task.new(id="t2", title="t", instruction="i", now=NOW + timedelta(seconds=1)))
    assert ledger.get_task("t1").model_dump() == placed.model_dump()
    assert (ledger.get_task("t2").repository, ledger.get_task("t2").branch) == (None, None)
    rows = {row.id: row for row in ledger.scan_task_rows()[0]}
    assert (rows["t1"].repository, rows["t1"].branch) == ("github.com/o/r", "dev")
    moved = ledger.change_task("t1", lambda t: (t.hold("wait", NOW), {})[1])
    assert (moved.repository, moved.branch) == ("github.com/o/r", "dev")  # no move touches it


def test_a_worker_s_pick_is_its_repository_s_tasks_and_those_of_none(
    target: LedgerTarget,
) -> None:
    ledger = target.open()
    for n, repository in enumerate(["a", "b", None, "a"]):
        at = NOW + timedelta(seconds=n)
        ledger.add_task(
            Task.new(id=f"t{n}", title="t", instruction="i", now=at, repository=repository)
        )
    assert [t.id for t in ledger.scan_tasks(runs_in="a")[0]] == ["t0", "t2", "t3"]
    assert [t.id for t in ledger.scan_tasks(runs_in="b")[0]] == ["t1", "t2"]
    assert [t.id for t in ledger.scan_tasks(runs_in=None)[0]] == ["t2"]
    assert [t.id for t in ledger.scan_tasks()[0]] == ["t0", "t1", "t2", "t3"]


def test_migrating_keeps_every_task_with_no_repository_and_round_trips(
    target: LedgerTarget,
) -> None:
    ledger = target.open(migrate=False)
    alembic_to(ledger, "0008")
    with ledger._engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO tasks (id, title, instruction, status, created_at, updated_at) "
                "VALUES ('old', 'old task', 'do it', 'queued', :at, :at)"
            ),
            {"at": "2026-01-01 00:00:00"},
        )
    assert ledger.migrate() == HEAD_REVISION
    old = ledger.get_task("old")
    assert (old.repository, old.branch, old.title) == (None, None, "old task")
    ledger.add_task(Task.new(id="new", title="n", instruction="i", now=NOW, repository="r"))
    alembic_to(ledger, "0008", down=True)
    with ledger._engine.connect() as conn:
        columns = {c["name"] for c in sa.inspect(conn).get_columns("tasks")}
        kept = conn.execute(sa.text("SELECT id FROM tasks ORDER BY id")).scalars().all()
    assert "repository" not in columns and "branch" not in columns
    assert kept == ["new", "old"]  # a downgrade drops the columns, never a task
    assert ledger.migrate() == HEAD_REVISION
    assert ledger.get_task("new").repository is None
    with ledger._engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(tasks)).scalar_one() == 2
