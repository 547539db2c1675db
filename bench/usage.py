"""What journaling usage costs: one report written as it arrives, and the sums read back.

Every usage report a coder's program makes is one ledger transaction (a ``usage`` row and its
``usage.reported`` event) on the thread that read it, so its cost is paid between a program's
model calls. This times, on a fresh SQLite ledger (or ``--url`` for PostgreSQL):

- a report journaled through the run meter (budget checked), per report;
- folding a task's journal back into per-dispatch totals (``task show``, a meter's start);
- ``assay usage`` summing a whole journal of ``--dispatches`` dispatches (in SQL), in-process.

    PYTHONPATH=src .venv/bin/python bench/usage.py [--reports 2000] [--dispatches 5000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from assay.adapters.store.schema import runs
from assay.adapters.store.sql import Ledger
from assay.adapters.store.usage_sums import usage_cells
from assay.core.tasks import Task
from assay.core.usage import BudgetLimits, UsageFigures
from assay.core.usage_report import UsageKey, summary_of
from assay.core.vocab import UsageGrouping
from assay.engine.local.metering import RunMeter, coder_key

NOW = datetime(2026, 12, 4, tzinfo=UTC)


def ledger_at(url: str | None) -> Ledger:
    ledger = Ledger(url or f"sqlite:///{tempfile.mkdtemp()}/assay.db")
    ledger.migrate()
    return ledger


def a_run(ledger: Ledger, task_id: str, run_id: str) -> None:
    ledger.add_task(Task.new(id=task_id, title=task_id, instruction="x", now=NOW))
    with ledger._engine.begin() as conn:
        conn.execute(
            sa.insert(runs).values(id=run_id, task_id=task_id, status="prep", started_at=NOW)
        )


def time_reports(ledger: Ledger, reports: int) -> list[float]:
    a_run(ledger, "t-reports", "r-reports")
    meter = RunMeter(
        ledger,
        task_id="t-reports",
        run_id="r-reports",
        limits=BudgetLimits(run_tokens=10**15),
        clock=lambda: NOW,
    )
    seat = meter.dispatch(coder_key("t-reports", "r-reports", 1, 1, "llm"))
    took = []
    for n in range(1, reports + 1):
        started = time.perf_counter()
        seat.report(UsageFigures(tokens_in=100 * n, tokens_out=10 * n, cost_usd=0.001 * n))
        took.append(time.perf_counter() - started)
    return took


def fill(ledger: Ledger, dispatches: int) -> None:
    """``dispatches`` finished dispatches over 100 tasks, two reports each, over 30 days."""
    when = [NOW]
    meters = {}
    for task in range(100):
        a_run(ledger, f"t{task}", f"r{task}")
        meters[task] = RunMeter(
            ledger,
            task_id=f"t{task}",
            run_id=f"r{task}",
            limits=BudgetLimits(),
            clock=lambda: when[0],
        )
    for n in range(dispatches):
        task = n % 100
        when[0] = NOW - timedelta(hours=n % 720)
        kind = ("claude", "codex", "llm", "aider")[n % 4]
        seat = meters[task].dispatch(coder_key(f"t{task}", f"r{task}", 1 + n // 100, 1, kind))
        seat.report(UsageFigures(tokens_in=1000, tokens_out=50, model=kind))
        seat.finish(UsageFigures(tokens_in=2000, tokens_out=90, cost_usd=0.01, model=kind))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reports", type=int, default=2000)
    parser.add_argument("--dispatches", type=int, default=5000)
    parser.add_argument("--url", help="a ledger URL (default: a fresh SQLite file)")
    args = parser.parse_args()
    ledger = ledger_at(args.url)
    took = time_reports(ledger, args.reports)
    print(
        f"a report journaled: median {statistics.median(took) * 1000:.2f} ms, "
        f"p95 {sorted(took)[int(len(took) * 0.95)] * 1000:.2f} ms ({args.reports} reports)"
    )
    started = time.perf_counter()
    ledger.usage(task_id="t-reports")
    print(f"a task's journal of {args.reports} rows folded: {_ms(started)}")
    fill(ledger, args.dispatches)
    for by in (UsageGrouping.TASK, UsageGrouping.DAY):
        started = time.perf_counter()
        with ledger.read() as conn:
            groups = usage_cells(conn, [UsageKey(by.value)])
            total = usage_cells(conn, [])
        summary = summary_of(groups, total[0] if total else None, by)
        dispatches = summary.total.spend.dispatches
        print(f"assay usage --by {by.value} over {dispatches} dispatches: {_ms(started)}")


def _ms(started: float) -> str:
    return f"{(time.perf_counter() - started) * 1000:.1f} ms"


if __name__ == "__main__":
    main()
