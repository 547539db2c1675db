"""How fast the SQL ledger records run closes.

Records ``--n`` run closes (default 10,000), each with 3 attempts and 4 dispatches, on SQLite
(a temporary file) and on PostgreSQL when ``--postgres URL`` or ``ASSAY_TEST_POSTGRES_URL`` is
given (in a fresh schema, dropped afterwards). Only ``close_run`` is timed: starting the run
and building its ``RunClose`` happen outside the clock. Prints closes per second and the p50
and p99 latency of one close, and the closes per second of this process's CPU time alone
(``cpu/s``: on a loaded machine the wall clock also counts waiting for a core; on PostgreSQL it
leaves out the server's work).

    .venv/bin/python bench/ledger.py [--n 10000] [--tasks 100] [--postgres URL]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _schemas import bench_schema

from assay.adapters.store.records import DispatchRecord, RunClose
from assay.adapters.store.sql import Ledger
from assay.core.attempts import AttemptRecord
from assay.core.settle import Verdict, settle
from assay.core.tasks import Task
from assay.core.vocab import AttemptOutcome, RunStatus

POSTGRES_ENV = "ASSAY_TEST_POSTGRES_URL"
WAVES = ((AttemptOutcome.BLOCKED, 2), (AttemptOutcome.BLOCKED, 1), (AttemptOutcome.PASSED, 1))
"""Per close: 3 attempts, 4 dispatches."""


def build_close(task: Task, run_id: str, now: datetime, max_attempts: int) -> RunClose:
    settlement = settle(task, Verdict(status=RunStatus.FAILED), "bench", max_attempts, now)
    attempts = [
        AttemptRecord(
            attempt=n,
            outcome=outcome,
            coder_dispatches=seats,
            failures=[f"test_{n} failed"] if outcome is AttemptOutcome.BLOCKED else [],
            finding_signatures=[f"test_{n} failed"] if outcome is AttemptOutcome.BLOCKED else [],
        )
        for n, (outcome, seats) in enumerate(WAVES, start=1)
    ]
    dispatches = [
        DispatchRecord(
            dispatch_id=f"{run_id}-a{n}-s{seat}",
            attempt=n,
            seat=seat,
            coder="command",
            viable=True,
            files_changed=3,
            tokens_used=12_000,
            cost_usd=0.02,
            wall_time_ms=45_000,
        )
        for n, (_outcome, seats) in enumerate(WAVES, start=1)
        for seat in range(seats)
    ]
    return RunClose(
        run_id=run_id,
        status=RunStatus.FAILED,
        task=task,
        settlement=settlement,
        reason="bench",
        attempts=attempts,
        dispatches=dispatches,
        judge_calls=2,
        land_attempts=0,
        payload_path=f".assay/runs/{run_id}/payload.json",
        finished_at=now,
    )


def measure(ledger: Ledger, n: int, task_count: int) -> tuple[list[float], float]:
    """Close ``n`` runs spread over ``task_count`` tasks: the wall seconds each close took,
    and the CPU seconds all of them took."""
    clock = datetime(2026, 1, 1, tzinfo=UTC)
    task_count = max(1, min(task_count, n))
    max_attempts = n // task_count + 2
    for t in range(task_count):
        ledger.add_task(Task.new(id=f"t{t}", title=f"task {t}", instruction="bench", now=clock))
    latencies: list[float] = []
    cpu = 0.0
    for i in range(n):
        clock += timedelta(milliseconds=10)
        run_id = f"r{i}"
        task = ledger.get_task(f"t{i % task_count}")
        task.start(clock, run_id=run_id)
        ledger.start_run(task, run_id)
        close = build_close(task, run_id, clock + timedelta(milliseconds=5), max_attempts)
        began, began_cpu = time.perf_counter(), time.process_time()
        ledger.close_run(close)
        latencies.append(time.perf_counter() - began)
        cpu += time.process_time() - began_cpu
    return latencies, cpu


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    rank = max(1, round(q / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def report(name: str, measured: tuple[list[float], float]) -> None:
    latencies, cpu = measured
    ordered = sorted(latencies)
    p50, p99 = (percentile(ordered, q) * 1000 for q in (50, 99))
    print(
        f"{name:<10} closes={len(latencies):>6}  closes/s={len(latencies) / sum(latencies):8.1f}  "
        f"p50={p50:7.3f} ms  p99={p99:7.3f} ms  cpu/s={len(latencies) / max(cpu, 1e-9):8.1f}"
    )


def bench_sqlite(n: int, tasks: int) -> None:
    with tempfile.TemporaryDirectory(prefix="assay-bench-") as tmp:
        ledger = Ledger.open(f"sqlite:///{Path(tmp) / 'assay.db'}")
        try:
            report("sqlite", measure(ledger, n, tasks))
        finally:
            ledger.close()


def bench_postgres(url: str, n: int, tasks: int) -> None:
    with bench_schema(url) as schema:
        ledger = Ledger.open(url, schema=schema)
        try:
            report("postgresql", measure(ledger, n, tasks))
        finally:
            ledger.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="run closes to record")
    parser.add_argument("--tasks", type=int, default=100, help="tasks the runs are spread over")
    parser.add_argument("--postgres", help=f"PostgreSQL URL (default: ${POSTGRES_ENV})")
    args = parser.parse_args()
    if args.n < 1:
        parser.error("--n must be at least 1")
    print(f"{args.n} run closes, 3 attempts and 4 dispatches each, over {args.tasks} tasks")
    bench_sqlite(args.n, args.tasks)
    url = args.postgres or os.environ.get(POSTGRES_ENV)
    if url:
        bench_postgres(url, args.n, args.tasks)
    else:
        print(f"postgresql skipped: give --postgres URL or set {POSTGRES_ENV}")


if __name__ == "__main__":
    main()
