"""A ledger whose usage journal has every kind of dispatch, for the reports on it.

Written through the Ledger (``record_usage``, as the engine writes it), relative to ``now``:

- ``t-fix`` ("fix the parser"), run ``r-1`` three days ago: ``a1.s1`` claude on sonnet,
  priced, reporting twice (3 days ago and 1 day ago: 15,000 in, 1,000 out, $0.075 in all);
  ``a1.s2`` the llm coder on mini, tokens but no cost (unpriced: 5,000 / 400); the judge
  ``j1`` on haiku, priced (900 / 50, $0.0011).
- ``t-docs`` ("write the docs"), run ``r-2`` an hour ago: ``a1.s1`` aider, which reported
  no usage at all (unreported); ``a1.s2`` claude on sonnet (7,000 / 900, $0.034).
- ``t-idle``: queued, never run, nothing journaled.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from assay.adapters.store.sql import Ledger
from assay.adapters.store.usage_log import DispatchKey
from assay.core.tasks import Task
from assay.core.usage import UsageFigures
from assay.core.vocab import UsageRole

TITLES = {"t-fix": "fix the parser", "t-docs": "write the docs", "t-idle": "rest"}
PRICED_COST = 0.1101  # 0.075 + 0.0011 + 0.034


def start(ledger: Ledger, task_id: str, run_id: str, at: datetime) -> None:
    task = ledger.get_task(task_id)
    task.start(at, run_id=run_id)
    ledger.start_run(task, run_id, started_at=at)


def report(
    ledger: Ledger,
    at: datetime,
    task_id: str,
    run_id: str,
    dispatch: str,
    source: str,
    figures: UsageFigures,
    *,
    role: UsageRole = UsageRole.CODER,
    seat: int | None = None,
) -> None:
    """Journal one increase of a dispatch's spending; priced when it carries a cost."""
    key = DispatchKey(task_id, run_id, dispatch, role, source, attempt=1, seat=seat)
    ledger.record_usage(key, figures, priced=figures.cost_usd is not None, at=at)


def fill(ledger: Ledger, now: datetime) -> None:
    days, minutes = timedelta(days=1), timedelta(minutes=1)
    for n, (task_id, title) in enumerate(TITLES.items()):
        at = now - 4 * days + n * minutes
        ledger.add_task(Task.new(id=task_id, title=title, instruction="do it", now=at))
    start(ledger, "t-fix", "r-1", now - 3 * days)
    first = now - 3 * days + minutes
    sonnet = "claude-sonnet-4"
    report(ledger, first, "t-fix", "r-1", "a1.s1", "claude",
           UsageFigures(12_000, 800, 0.06, sonnet), seat=1)  # fmt: skip
    report(ledger, first + minutes, "t-fix", "r-1", "a1.s2", "llm",
           UsageFigures(5_000, 400, None, "gpt-4.1-mini"), seat=2)  # fmt: skip
    report(ledger, first + 2 * minutes, "t-fix", "r-1", "a1.judges.j1", "j1",
           UsageFigures(900, 50, 0.0011, "claude-haiku"), role=UsageRole.JUDGE)  # fmt: skip
    report(ledger, now - days, "t-fix", "r-1", "a1.s1", "claude",
           UsageFigures(3_000, 200, 0.015, sonnet), seat=1)  # fmt: skip
    start(ledger, "t-docs", "r-2", now - 60 * minutes)
    report(ledger, now - 50 * minutes, "t-docs", "r-2", "a1.s1", "aider",
           UsageFigures(0, 0, None, None, reported=False), seat=1)  # fmt: skip
    report(ledger, now - 30 * minutes, "t-docs", "r-2", "a1.s2", "claude",
           UsageFigures(7_000, 900, 0.034, sonnet), seat=2)  # fmt: skip
