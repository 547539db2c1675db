"""The refund and quota streaks of a task, read from the ledger.

settle is pure, so the streak it bounds (``budgets.max_refunds``) is read here: the task's
runs started since its last release (a ``task.saved`` event that made it queued again), their
settle rows in the order they started. Nothing is counted twice and no counter can drift: the
runs already hold the answer.
"""

from __future__ import annotations

from assay.adapters.store.sql import Ledger
from assay.core.backoff import quota_streak
from assay.core.settle import RefundStreak
from assay.core.vocab import EventKind, TaskStatus


def refund_streak(ledger: Ledger, task_id: str) -> RefundStreak:
    """The refunded runs in a row of ``task_id``'s closed runs since its last release."""
    since_release: list[str] = []
    for event in ledger.events(task_id):
        if (
            event.kind == EventKind.TASK_SAVED
            and event.data.get("status") == TaskStatus.QUEUED.value
        ):
            since_release = []
        elif event.kind == EventKind.RUN_OPENED and event.run_id:
            since_release.append(event.run_id)
    runs = {r.id: r for r in ledger.runs(task_id)}
    closed = [runs[i] for i in since_release if i in runs and not runs[i].open]
    return RefundStreak.of((r.settle_row, r.reason) for r in closed)


def closed_quota_streak(ledger: Ledger, task_id: str) -> int:
    """The quota-refunded runs in a row among ``task_id``'s closed runs (a run lost to quota
    waits longer the longer the streak: :func:`assay.core.backoff.quota_wait`); the run being
    closed, still open, is the ``+ 1`` its close adds."""
    return quota_streak([r.settle_row for r in ledger.runs(task_id) if not r.open])
