"""Deleting tasks: a task and everything the ledger keeps of it, in one transaction.

A task's rows are its ``tasks`` row (with its contract), its stage records, its runs and each
run's attempts, dispatches, documents and logs, and the events and usage rows of the task or its
runs. :func:`delete_tasks` locks the tasks first (so a run cannot start or close in between:
on PostgreSQL the row lock, on SQLite the write lock), checks each against the caller's rule,
then deletes children before parents, so no foreign key is ever left dangling. The event log
is append-only by trigger: the tasks being deleted are listed in ``deleting_tasks`` for the
transaction, which is what lets their events go (revision 0008). A task that is running (or
has a run open) is never deleted. What was deleted comes back with the runs it had, for the
caller to remove their files once this has committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa

from assay.adapters.store.errors import LedgerError
from assay.adapters.store.records import RunRecord
from assay.adapters.store.schema import (
    attempts,
    deleting_tasks,
    dispatch_totals,
    dispatches,
    events,
    run_documents,
    run_logs,
    runs,
    stage_records,
    tasks,
    usage,
)
from assay.core.tasks import how_to_stop
from assay.core.vocab import TaskStatus

IDS_PER_STATEMENT = 500
"""Ids bound in one ``IN (…)``: far below SQLite's variable limit, whatever its build."""


@dataclass(frozen=True)
class TaskState:
    """What a rule decides on: the task's row as locked."""

    id: str
    title: str
    status: str  # as stored: a row a newer version wrote may hold a status this one lacks
    updated_at: datetime
    open_run: str | None  # a run of it not closed yet


@dataclass(frozen=True)
class DeletedTask:
    """A deleted task: what it was, and what went with it."""

    id: str
    title: str
    status: str
    updated_at: datetime
    runs: list[RunRecord]
    events: int
    usage: int


@dataclass
class Deletion:
    """What one transaction deleted, and each task it kept with why."""

    deleted: list[DeletedTask] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)


class DeleteRefused(LedgerError):
    """Nothing was deleted: some of the tasks asked for cannot be (``kept`` says why)."""

    def __init__(self, kept: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{task_id}: {why}" for task_id, why in kept))
        self.kept = kept


Rule = Callable[[TaskState], str | None]
"""Why a task is kept (not deleted), or None to delete it."""


def running(state: TaskState) -> str | None:
    """The rule every deletion obeys: a running task, or one with a run open, stays."""
    if state.status == TaskStatus.RUNNING.value or state.open_run is not None:
        run = f" (run {state.open_run} is open)" if state.open_run else ""
        return f"it is running{run}: stop its run first: {how_to_stop(state.id)}"
    return None


def delete_tasks(
    conn: sa.Connection,
    task_ids: Sequence[str],
    *,
    rule: Rule | None = None,
    all_or_nothing: bool = True,
    dry_run: bool = False,
) -> Deletion:
    """Delete ``task_ids`` (each unknown id is kept: "no such task") but those ``rule`` or
    :func:`running` keeps; with ``all_or_nothing``, one kept task refuses them all
    (:class:`DeleteRefused`, nothing deleted). ``dry_run``: the same answer, nothing deleted."""
    wanted = list(dict.fromkeys(task_ids))
    states = _locked(conn, wanted)
    result = Deletion()
    chosen: list[str] = []
    for task_id in wanted:
        state = states.get(task_id)
        why = "no such task" if state is None else running(state) or (rule and rule(state))
        if why:
            result.kept.append((task_id, why))
        else:
            chosen.append(task_id)
    if result.kept and all_or_nothing:
        raise DeleteRefused(result.kept)
    if not chosen:
        return result
    their_runs = _runs(conn, chosen)
    run_ids = [r.id for rs in their_runs.values() for r in rs]
    event_counts = _counts(conn, events, chosen)
    usage_counts = _counts(conn, usage, chosen)
    # The events trigger lets these tasks' events go, for this transaction only.
    for ids in _chunks([] if dry_run else chosen):
        conn.execute(sa.insert(deleting_tasks), [{"task_id": i} for i in ids])
    # Children before parents: no foreign key is left pointing at a deleted row.
    for ids in _chunks([] if dry_run else run_ids):
        conn.execute(sa.delete(usage).where(usage.c.run_id.in_(ids)))
        conn.execute(sa.delete(dispatch_totals).where(dispatch_totals.c.run_id.in_(ids)))
        conn.execute(sa.delete(events).where(events.c.run_id.in_(ids)))
        conn.execute(sa.delete(run_documents).where(run_documents.c.run_id.in_(ids)))
        conn.execute(sa.delete(run_logs).where(run_logs.c.run_id.in_(ids)))
        conn.execute(sa.delete(dispatches).where(dispatches.c.run_id.in_(ids)))
        conn.execute(sa.delete(attempts).where(attempts.c.run_id.in_(ids)))
    for ids in _chunks([] if dry_run else chosen):
        conn.execute(sa.delete(usage).where(usage.c.task_id.in_(ids)))
        conn.execute(sa.delete(dispatch_totals).where(dispatch_totals.c.task_id.in_(ids)))
        conn.execute(sa.delete(events).where(events.c.task_id.in_(ids)))
        conn.execute(sa.delete(runs).where(runs.c.task_id.in_(ids)))
        conn.execute(sa.delete(stage_records).where(stage_records.c.task_id.in_(ids)))
        conn.execute(sa.delete(tasks).where(tasks.c.id.in_(ids)))
        conn.execute(sa.delete(deleting_tasks).where(deleting_tasks.c.task_id.in_(ids)))
    for task_id in chosen:
        state = states[task_id]
        result.deleted.append(
            DeletedTask(
                id=task_id,
                title=state.title,
                status=state.status,
                updated_at=state.updated_at,
                runs=their_runs.get(task_id, []),
                events=event_counts.get(task_id, 0),
                usage=usage_counts.get(task_id, 0),
            )
        )
    return result


def _locked(conn: sa.Connection, task_ids: list[str]) -> dict[str, TaskState]:
    """The tasks' rows, locked for the transaction (PostgreSQL: ``FOR UPDATE``, which a run's
    start, close or an operator's move waits behind; SQLite: the write lock already held)."""
    found: dict[str, TaskState] = {}
    for ids in _chunks(task_ids):
        query = (
            sa.select(tasks.c.id, tasks.c.title, tasks.c.status, tasks.c.updated_at)
            .where(tasks.c.id.in_(ids))
            .with_for_update(of=tasks)
        )
        rows = conn.execute(query).all()
        open_runs = dict(
            conn.execute(
                sa.select(runs.c.task_id, sa.func.min(runs.c.id))
                .where(runs.c.task_id.in_(ids), runs.c.finished_at.is_(None))
                .group_by(runs.c.task_id)
            ).all()
        )
        for row in rows:
            found[row.id] = TaskState(
                id=row.id,
                title=row.title,
                status=row.status,
                updated_at=row.updated_at,
                open_run=open_runs.get(row.id),
            )
    return found


def _runs(conn: sa.Connection, task_ids: list[str]) -> dict[str, list[RunRecord]]:
    found: dict[str, list[RunRecord]] = {}
    for ids in _chunks(task_ids):
        query = sa.select(runs).where(runs.c.task_id.in_(ids)).order_by(runs.c.started_at)
        for row in conn.execute(query):
            record = RunRecord.model_validate(row._asdict())
            found.setdefault(record.task_id, []).append(record)
    return found


def _counts(conn: sa.Connection, table: sa.Table, task_ids: list[str]) -> dict[str, int]:
    """Rows of ``table`` per task (events and usage rows carry their task's id)."""
    found: dict[str, int] = {}
    for ids in _chunks(task_ids):
        query = (
            sa.select(table.c.task_id, sa.func.count())
            .where(table.c.task_id.in_(ids))
            .group_by(table.c.task_id)
        )
        found.update({str(task_id): int(n) for task_id, n in conn.execute(query)})
    return found


def _chunks(ids: Sequence[str]) -> Iterator[list[str]]:
    for start in range(0, len(ids), IDS_PER_STATEMENT):
        yield list(ids[start : start + IDS_PER_STATEMENT])
