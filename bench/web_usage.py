"""How fast the dashboard's usage page reads over a large ledger.

Builds ``bench/web.py``'s queue of ``--tasks`` tasks (default 100,000; its builder, imported),
spreads their runs over the last ``--days`` days (default 200) up to now (one in six refunded,
one in fifty still open), and journals each run's usage as programs report it: two coder seats
(claude priced, reporting twice; the llm coder with tokens but no cost, or aider with no usage
at all) and a judge, bulk-inserted into the ``usage`` table. Times, as medians over
``--repeat`` calls after a warm-up, through the real app (``create_app`` under FastAPI's
TestClient, templates rendered): ``GET /usage`` (the last 30 days), ``GET /usage.json``, and
a whole year (every run of the ledger). The usage rows are bulk-inserted, so each dispatch's
totals are then summed from them by revision 0012's backfill (as a ledger upgraded to it has
them). On SQLite (a temporary file) and on
PostgreSQL when ``--postgres URL`` or ``ASSAY_TEST_POSTGRES_URL`` is given (ANALYZEd after
the bulk load, as autovacuum would).

    PYTHONPATH=src:tests:bench .venv/bin/python bench/web_usage.py [--tasks 100000] [--days 200]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from web import (
    BEARER,
    POSTGRES_ENV,
    bench_config,
    fill_queue,
    line,
    median_ms,
    on_each_backend,
    sum_dispatches,
)

from assay.adapters.store.schema import runs, usage
from assay.adapters.store.sql import Ledger

BATCH = 20_000


def spread(engine: sa.Engine, count: int, days: int, now: datetime) -> None:
    """Run ``n`` (of ``fill_queue``) started at an even step over the last ``days`` days; one
    in six refunded, one in fifty still open."""
    step = timedelta(days=days) / count
    rows = []
    for n in range(count):
        started = now - (count - n) * step
        spent: bool | None = None if n % 50 == 49 else n % 6 != 5
        rows.append(
            {
                "rid": f"r{n:05d}",
                "started": started,
                "finished": None if spent is None else started + timedelta(minutes=3),
                "spent": spent,
            }
        )
    update = (
        sa.update(runs)
        .where(runs.c.id == sa.bindparam("rid"))
        .values(
            started_at=sa.bindparam("started"),
            finished_at=sa.bindparam("finished"),
            attempt_spent=sa.bindparam("spent"),
        )
    )
    with engine.begin() as conn:
        for at in range(0, len(rows), BATCH):
            conn.execute(update, rows[at : at + BATCH])


def journal(engine: sa.Engine, count: int, days: int, now: datetime) -> int:
    """Each run's usage rows, as its programs reported them; the number of rows."""
    step = timedelta(days=days) / count
    rows: list[dict[str, Any]] = []

    def row(n: int, minutes: int, dispatch: str, source: str, **figures: Any) -> None:
        base = {
            "at": now - (count - n) * step + timedelta(minutes=minutes),
            "task_id": f"t{n:05d}",
            "run_id": f"r{n:05d}",
            "dispatch": dispatch,
            "attempt": 1,
            "seat": None if "judges" in dispatch else int(dispatch[-1]),
            "role": "judge" if "judges" in dispatch else "coder",
            "source": source,
            "model": None,
            "tokens_in": 0,
            "tokens_out": 0,
            "cost_usd": None,
            "priced": False,
            "reported": True,
        }
        rows.append({**base, **figures})

    for n in range(count):
        row(n, 1, "a1.s1", "claude", model="sonnet", tokens_in=9000, tokens_out=400,
            cost_usd=0.04, priced=True)  # fmt: skip
        row(n, 2, "a1.s1", "claude", tokens_in=3000, tokens_out=200, cost_usd=0.015, priced=True)
        if n % 3:
            row(n, 2, "a1.s2", "llm", model="mini", tokens_in=5000, tokens_out=300)
        else:
            row(n, 2, "a1.s2", "aider", reported=False)
        row(n, 3, "a1.judges.j1", "j1", model="haiku", tokens_in=800, tokens_out=40,
            cost_usd=0.001, priced=True)  # fmt: skip
    with engine.begin() as conn:
        for at in range(0, len(rows), BATCH):
            conn.execute(sa.insert(usage), rows[at : at + BATCH])
        sum_dispatches(conn)  # fill_queue's rows and these
    return len(rows)


def bench(ledger: Ledger, engine: sa.Engine, args: argparse.Namespace) -> None:
    from fastapi.testclient import TestClient

    from assay.web.app import create_app

    began = time.perf_counter()
    now = datetime.now(UTC)
    fill_queue(engine, args.tasks, totals=False)
    spread(engine, args.tasks, args.days, now)
    journaled = journal(engine, args.tasks, args.days, now)
    analyze(engine)
    print(f"  ({journaled} usage rows; built in {time.perf_counter() - began:.1f} s)")
    client = TestClient(
        create_app(bench_config(ledger)), base_url="http://127.0.0.1:8765", headers=BEARER
    )

    def get(path: str) -> Callable[[], object]:
        def call() -> object:
            response = client.get(path)
            assert response.status_code == 200, (path, response.status_code, response.text)
            return response

        return call

    year = f"?since={(now - timedelta(days=365)).date()}&until={now.date()}"
    pages = [
        ("GET /usage (last 30 days)", "/usage"),
        ("GET /usage.json (last 30 days)", "/usage.json"),
        ("GET /usage (a year: every run)", "/usage" + year),
    ]
    for name, path in pages:
        line(name, median_ms(get(path), args.repeat))


def analyze(engine: sa.Engine) -> None:
    """The statistics the planner has after a bulk load once autovacuum (or, on SQLite, an
    operator's ``ANALYZE``) has run."""
    with engine.begin() as conn:
        conn.execute(sa.text("ANALYZE"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=100_000, help="tasks, one run each")
    parser.add_argument("--days", type=int, default=200, help="days the runs are spread over")
    parser.add_argument("--repeat", type=int, default=15, help="timed calls per figure")
    parser.add_argument("--postgres", help=f"PostgreSQL URL (default: ${POSTGRES_ENV})")
    parser.add_argument("--skip-sqlite", action="store_true", help="PostgreSQL only")
    args = parser.parse_args()
    if min(args.tasks, args.days, args.repeat) < 1:
        parser.error("every count must be at least 1")
    print(f"{args.tasks} tasks over {args.days} days; medians of {args.repeat} calls")
    on_each_backend(bench, args)


if __name__ == "__main__":
    main()
