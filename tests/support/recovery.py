"""A ledger as a process that died mid-run leaves it: task ``t1`` running as run ``r1``, its
events journaled; what the recovery tests close."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from assay.adapters.store.sql import Ledger
from assay.core.tasks import Task

START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def running_ledger(folder: Path, events: Iterable[tuple[str, dict[str, Any]]] = ()) -> Ledger:
    """A SQLite ledger in ``folder`` with task ``t1`` started as run ``r1`` at :data:`START`
    and ``events`` journaled for it."""
    ledger = Ledger.open(f"sqlite:///{folder / 'assay.db'}")
    ledger.migrate()
    task = Task.new(id="t1", title="t", instruction="i", now=START)
    ledger.add_task(task)
    task.start(START, run_id="r1")
    ledger.start_run(task, "r1", started_at=START)
    for kind, data in events:
        ledger.append_event(kind, data, at=START, task_id="t1", run_id="r1")
    return ledger
