"""The refund streak of a task, read from the ledger, and the wait after a refunded run.

settle is pure, so the streak it bounds (``budgets.max_refunds``) is read here: the task's
runs started since its last release (a ``task.saved`` event that made it queued again), their
settle rows in the order they started. Nothing is counted twice and no counter can drift: the
runs already hold the answer.
"""

from __future__ import annotations

from datetime import datetime

from assay.adapters.store.sql import Ledger
from assay.core.backoff import QUOTA_ROWS, quota_streak, quota_wait
from assay.core.settle import RefundStreak, Settlement
from assay.core.tasks import Task
from assay.core.vocab import EventKind, SettleRow, TaskStatus

RELEASE_EVENT = EventKind.TASK_SAVED
RUN_OPENED_EVENT = EventKind.RUN_OPENED


def refund_streak(ledger: Ledger, task_id: str) -> RefundStreak:
    """The refunded runs in a row of ``task_id``'s closed runs since its last release."""
    since_release: list[str] = []
    for event in ledger.events(task_id):
        if event.kind == RELEASE_EVENT and event.data.get("status") == TaskStatus.QUEUED.value:
            since_release = []
        elif event.kind == RUN_OPENED_EVENT and event.run_id:
            since_release.append(event.run_id)
    runs = {r.id: r for r in ledger.runs(task_id)}
    closed = [runs[i] for i in since_release if i in runs and not runs[i].open]
    return RefundStreak.of((r.settle_row, r.reason) for r in closed)


def wait_after_refund(
    ledger: Ledger,
    task: Task,
    settlement: Settlement,
    refunds: RefundStreak,
    reset_at: datetime | None,
    now: datetime,
) -> None:
    """Set the task's wait after a run lost to quota or a machine fault, before the close is
    written (so the refund and its wait land in one transaction). A held task has no wait."""
    if task.status is not TaskStatus.FAILED:
        return
    if settlement.row in QUOTA_ROWS:
        task.wait_until(quota_wait_for(ledger, task, reset_at, now), now)
    elif settlement.row is SettleRow.FAILED_MACHINE_FAULT:
        # A provider outage or a broken environment: exponential backoff on the streak.
        task.wait_until(quota_wait(None, now, refunds.count + 1), now)


def quota_wait_for(
    ledger: Ledger, task: Task, reset_at: datetime | None, now: datetime
) -> datetime:
    """When a task just lost a run to quota may run again: ``quota_wait`` on the streak.

    The streak is read from the task's closed runs in the ledger (this run, still open, is
    the ``+ 1``), so there is no separate counter to drift from them.
    """
    closed = [r.settle_row for r in ledger.runs(task.id) if not r.open]
    return quota_wait(reset_at, now, quota_streak(closed) + 1)
