"""How fast the dashboard reads: its queue and run pages, as data and as rendered HTTP pages,
and how soon a new ledger event reaches a live page's event stream.

Builds a ledger of ``--tasks`` tasks (default 10,000; each with its contract, its spent
attempts and one closed run, bulk-inserted into the store's own tables) and one task whose run
has ``--attempts`` attempts of ``--seats`` seats (default 20 x 3), written through the store's
API as a run writes it (start_run, every event of every attempt, close_run with its documents).
Times, as medians over ``--repeat`` calls after a warm-up: ``queue_page`` (first page, a
status filter, the last page) and ``run_view``; the same pages through the real app
(``create_app`` under FastAPI's TestClient, rendered templates included); and the latency from
``append_event`` to the event's arrival on ``GET /events`` of a real uvicorn server (the
dashboard's own ``DashboardServer``). On SQLite (a temporary file) and on PostgreSQL when
``--postgres URL`` or ``ASSAY_TEST_POSTGRES_URL`` is given (a fresh schema, dropped after;
VACUUM ANALYZEd after the bulk load, as autovacuum would, so the planner is not guessing).

    .venv/bin/python bench/web.py [--tasks 10000] [--attempts 20] [--seats 3] [--repeat 25]
        [--postgres URL] [--skip-sqlite]
"""

from __future__ import annotations

import argparse
import importlib
import os
import queue
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from _schemas import bench_schema

from assay.adapters.store.connect import make_engine
from assay.adapters.store.records import DispatchRecord, RunClose, RunDocument
from assay.adapters.store.schema import events, runs, stage_records, tasks, usage
from assay.adapters.store.sql import Ledger
from assay.core.attempts import AttemptRecord
from assay.core.payload import build_payload
from assay.core.results import ValidatorResult
from assay.core.settle import Verdict, settle
from assay.core.tasks import Task
from assay.core.vocab import AttemptOutcome, EventKind, HaltType, RunStatus, Severity
from assay.web import views
from assay.web.config import WebConfig
from assay.web.pages import STATUS_FILTERS
from assay.web.queue_query import QueueQuery

POSTGRES_ENV = "ASSAY_TEST_POSTGRES_URL"
TARGET_MS = 150.0
SSE_TARGET_MS = 1000.0
STATUSES = ("done", "done", "failed", "held", "queued")
CODERS = ("claude", "llm", "command")
SETTLE_ROWS = ("halted", "blocked", "blocked_with_pr", "unrunnable")
START = datetime(2026, 1, 1, tzinfo=UTC)
BIG_TASK = "t-big"
BIG_RUN = "r-big"
# The queue's views an operator shares (web/queue_query.py): a search, filters, each sort.
QUEUE_VIEWS: tuple[tuple[str, dict[str, str]], ...] = (
    ("q=a title's words", {"q": "test number 4242"}),
    ("q=no match", {"q": "no task says this"}),
    ("status=needs-you", {"status": "needs-you"}),
    ("coder=claude", {"coder": "claude"}),
    ("created in one week", {"since": "2026-01-02", "until": "2026-01-08"}),
    ("sort=updated", {"sort": "updated"}),
    ("sort=updated&dir=asc, status=held", {"sort": "updated", "dir": "asc", "status": "held"}),
    ("sort=attempts", {"sort": "attempts"}),
    ("q + coder + sort", {"q": "flaky", "coder": "llm", "sort": "attempts", "dir": "asc"}),
    ("sort=cost", {"sort": "cost"}),
    ("sort=duration&dir=asc", {"sort": "duration", "dir": "asc"}),
    ("held_by=operator", {"held_by": "operator"}),
    ("held_by=operator:alice", {"held_by": "operator:alice"}),
    ("held_by=halt", {"held_by": "halt"}),
    ("held_by=budget + sort=cost", {"held_by": "budget", "sort": "cost"}),
    (
        "q + coder + held_by + since",
        {"q": "flaky", "coder": "claude", "held_by": "machine", "since": "2026-01-01"},
    ),
    ("coder=llm + sort=duration", {"coder": "llm", "sort": "duration"}),
)
# Every dashboard request needs a credential: the bench's own, sent as a script would.
BENCH_TOKEN = "bench-token-0123456789abcdef"
BEARER = {"Authorization": f"Bearer {BENCH_TOKEN}"}


def bench_config(ledger: Ledger, **settings: Any) -> WebConfig:
    """The dashboard's config with the bench's token (imported here: bench/web_streams.py
    imports this module, also against a checkout from before tokens)."""
    from assay.web.auth import Credentials

    return WebConfig(ledger=ledger, credentials=Credentials.of(token=BENCH_TOKEN), **settings)


def fill_queue(engine: sa.Engine, count: int, *, totals: bool = True) -> None:
    """``count`` tasks, each with a contract, its spent attempt and one closed run (and the
    events a real task and run leave: added, opened, closed), in a few bulk inserts."""
    task_rows, stage_rows, run_rows, event_rows, usage_rows = [], [], [], [], []
    for n in range(count):
        at = START + timedelta(seconds=n)
        status = STATUSES[n % len(STATUSES)]
        task_id, run_id = f"t{n:05d}", f"r{n:05d}"
        task_rows.append(
            {
                "id": task_id,
                "title": f"Fix the flaky test number {n}",
                "instruction": f"Make test {n} pass reliably.",
                "status": status,
                "last_error": f"run r{n:05d}: tests failed" if status == "failed" else None,
                "hold_reason": "needs a human" if status == "held" else None,
                "hold_source": ("manual" if n % 2 else "machine") if status == "held" else None,
                "diagnostic": None,
                "created_at": at,
                "updated_at": at + timedelta(minutes=5),
                "not_before": None,
                "contract": {
                    "task": f"Make test {n} pass",
                    "coder": {"kind": CODERS[n % len(CODERS)]},
                    "budgets": {"max_attempts": 5},
                },
                # What the ledger keeps from the rows below (task_totals), as a write would.
                "coders": f"|kind={CODERS[n % len(CODERS)]}|",
                "cost_usd": 0.0 if n % 7 == 0 else round(0.01 * (n % 97), 4),
                "cost_unknown": 1 if n % 7 == 0 else 0,
                "run_seconds": 180.0 + n % 600,
                "sort_attempts": 1 + n % 4,  # the task stage record's, below
            }
        )
        stage_rows.append(
            {
                "task_id": task_id,
                "stage": "task",
                "attempts": 1 + n % 4,
                "last_verdict": "advance",
                "last_finding_signatures": [],
            }
        )
        run_rows.append(
            {
                "id": run_id,
                "task_id": task_id,
                "dispatch_id": run_id,
                "status": "merged" if status == "done" else "blocked",
                "settle_row": (
                    "succeeded" if status == "done" else SETTLE_ROWS[n % len(SETTLE_ROWS)]
                ),
                "attempt_spent": True,
                "task_status": status,
                "reason": "bench",
                "payload_path": None,
                "started_at": at + timedelta(minutes=1),
                "finished_at": at + timedelta(minutes=1, seconds=180 + n % 600),
            }
        )
        event_rows.extend(
            [
                {"at": at, "task_id": task_id, "run_id": None, "kind": "task.added", "data": {}},
                {"at": at, "task_id": task_id, "run_id": run_id, "kind": "run.opened", "data": {}},
                {"at": at, "task_id": task_id, "run_id": run_id, "kind": "run.closed", "data": {}},
            ]
        )
        if status == "held" and n % 2:  # an operator's hold, after the run
            by = ("alice", "bob")[n % 4 // 2]
            data = {"status": "held", "action": "hold", "by": by, "via": "cli"}
            event_rows.append(
                {"at": at, "task_id": task_id, "run_id": None, "kind": "task.saved", "data": data}
            )
        usage_rows.append(
            {
                "at": at,
                "task_id": task_id,
                "run_id": run_id,
                "dispatch": "a1.s1",
                "attempt": 1,
                "seat": 1,
                "role": "coder",
                "source": CODERS[n % len(CODERS)],
                "model": None,
                "tokens_in": 1000 + n,
                "tokens_out": 100,
                "cost_usd": None if n % 7 == 0 else round(0.01 * (n % 97), 4),
                "priced": n % 7 != 0,
                "reported": True,
            }
        )
    with engine.begin() as conn:
        for table, rows in ((tasks, task_rows), (stage_records, stage_rows), (runs, run_rows)):
            conn.execute(sa.insert(table), rows)
        conn.execute(sa.insert(events), event_rows)
        conn.execute(sa.insert(usage), usage_rows)
        if totals:  # ``totals`` False: the caller bulk-inserts more usage rows, then sums them
            sum_dispatches(conn)


def sum_dispatches(conn: sa.Connection) -> None:
    """Each dispatch's totals summed from the usage rows bulk-inserted (which bypass the
    ledger's write of them), by revision 0012's own backfill, as an upgraded ledger has them."""
    revision = importlib.import_module(
        "assay.adapters.store.migrations.versions.0012_dispatch_totals"
    )
    revision.backfill(conn)


def fill_big_run(ledger: Ledger, attempts: int, seats: int) -> None:
    """One task whose run has ``attempts`` attempts of ``seats`` seats (blocked until the last),
    written as the engine writes a run: its events one by one, then its close."""
    at = START + timedelta(days=30)
    task = Task.new(id=BIG_TASK, title="A hard-won fix", instruction="Fix it.", now=at)
    ledger.add_task(task, contract={"task": "Fix it.", "budgets": {"max_attempts": 3}})
    task.start(at, run_id=BIG_RUN)
    ledger.start_run(task, BIG_RUN, dispatch_id=BIG_RUN)
    checks = ("tests", "scope", "secrets")

    def emit(kind: EventKind, data: dict[str, Any]) -> None:
        ledger.append_event(kind, data, at=at, task_id=BIG_TASK, run_id=BIG_RUN)

    records, dispatches = [], []
    for a in range(1, attempts + 1):
        passed = a == attempts
        emit(EventKind.ATTEMPT_STARTED, {"attempt": a})
        for s in range(1, seats + 1):
            emit(EventKind.DISPATCH_STARTED, {"attempt": a, "seat": s, "coder": "claude"})
        for s in range(1, seats + 1):
            files = [f"src/module_{s}.py", "tests/test_module.py"]
            emit(
                EventKind.SEAT_FINISHED,
                {
                    "attempt": a,
                    "seat": s,
                    "coder": "claude",
                    "files": files,
                    "viable": True,
                    "stop_reason": "completed",
                    "error": None,
                    "tokens_used": 41_000,
                    "cost_usd": 0.31,
                    "wall_time_ms": 95_000,
                },
            )
            dispatches.append(
                DispatchRecord(
                    dispatch_id=f"{BIG_RUN}.a{a}.s{s}",
                    attempt=a,
                    seat=s,
                    coder="claude",
                    label="ABC"[s - 1] if s <= 3 else None,
                    viable=True,
                    files_changed=len(files),
                    tokens_used=41_000,
                    cost_usd=0.31,
                    wall_time_ms=95_000,
                )
            )
            for v in checks:
                blocks = v == "tests" and not passed
                emit(
                    EventKind.VALIDATOR_FINISHED,
                    {
                        "attempt": a,
                        "seat": s,
                        "validator": v,
                        "severity": "block" if blocks else "pass",
                        "error": False,
                        "justification": "FAILED tests/test_module.py::test_edge\n" * 40,
                        "findings": [
                            f"tests/test_module.py::test_edge_{i} failed" for i in range(8)
                        ],
                    },
                )
        emit(
            EventKind.JUDGES_RANKED,
            {"attempt": a, "winner": "A", "present": 3, "quorum": 2},
        )
        failures = [] if passed else ["tests: FAILED tests/test_module.py::test_edge"]
        emit(
            EventKind.ATTEMPT_DECIDED,
            {
                "attempt": a,
                "outcome": "passed" if passed else "blocked",
                "action": "proceed" if passed else "recover",
                "next": "land" if passed else "recover",
                "why": "validators pass" if passed else "tests block",
                "seat": 1,
                "failures": failures,
            },
        )
        outcome = AttemptOutcome.PASSED if passed else AttemptOutcome.BLOCKED
        records.append(
            AttemptRecord(
                attempt=a,
                outcome=outcome,
                coder_dispatches=seats,
                failures=failures,
                finding_signatures=[f"sig-{a}"] if failures else [],
            )
        )
    settlement = settle(task, Verdict(status=RunStatus.MERGED), "merged", 3, at)
    payload = build_payload(
        task_id=BIG_TASK,
        run_id=BIG_RUN,
        dispatch_id=BIG_RUN,
        status=RunStatus.MERGED,
        halt_type=HaltType.NONE,
        reason="merged",
        task_status=settlement.new_status,
        attempt_spent=settlement.attempt_spent,
        task_spec="Fix it.",
        attempts=records,
        started_at=at,
        finished_at=at + timedelta(hours=1),
        validator_results=[ValidatorResult(validator_id=v, severity=Severity.PASS) for v in checks],
    ).to_json()
    diff = "".join(f"+line {i} of the fix\n-line {i} before\n" for i in range(3000))
    ledger.close_run(
        RunClose(
            run_id=BIG_RUN,
            status=RunStatus.MERGED,
            task=task,
            settlement=settlement,
            reason="merged",
            attempts=records,
            dispatches=dispatches,
            judge_calls=attempts * 3,
            land_attempts=1,
            finished_at=at + timedelta(hours=1),
            document=RunDocument.build(payload, diff=diff),
        )
    )


def median_ms(call: Callable[[], object], repeat: int) -> float:
    for _ in range(3):
        call()
    walls = []
    for _ in range(repeat):
        began = time.perf_counter()
        call()
        walls.append(time.perf_counter() - began)
    return statistics.median(walls) * 1000


def line(name: str, ms: float, target: float = TARGET_MS) -> None:
    verdict = "ok" if ms < target else "OVER"
    print(f"  {name:<38} median {ms:8.2f} ms   target < {target:.0f} ms   {verdict}")


def sse_latency(ledger: Ledger, samples: int) -> list[float]:
    """Seconds from ``append_event`` until ``GET /events`` of a real server yields it."""
    from assay.web.server import DashboardServer

    server = DashboardServer(bench_config(ledger, port=0))
    server.start()
    arrived: queue.Queue[int] = queue.Queue()
    stop = threading.Event()

    def listen() -> None:
        with (
            httpx.Client(timeout=None, headers=BEARER) as client,
            client.stream("GET", f"{server.url}events", params={"task_id": BIG_TASK}) as stream,
        ):
            for text in stream.iter_lines():
                if stop.is_set():
                    return
                if text.startswith("id: "):
                    arrived.put(int(text[4:]))

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    time.sleep(0.5)  # the stream is open and its subscriber registered
    found = []
    try:
        for _ in range(samples):
            began = time.perf_counter()
            written = ledger.append_event(
                EventKind.WARNING,
                {"message": "bench"},
                at=datetime.now(UTC),
                task_id=BIG_TASK,
                run_id=BIG_RUN,
            )
            while arrived.get(timeout=5) != written:
                pass
            found.append(time.perf_counter() - began)
            time.sleep(0.05)
    finally:
        stop.set()
        server.stop()
    return found


def bench(ledger: Ledger, engine: sa.Engine, args: argparse.Namespace) -> None:
    from fastapi.testclient import TestClient

    from assay.web.app import create_app

    began = time.perf_counter()
    fill_queue(engine, args.tasks)
    fill_big_run(ledger, args.attempts, args.seats)
    if engine.dialect.name == "postgresql":
        # What autovacuum does after a bulk load: the statistics, and a vacuum (the trigram
        # indexes' pending entries merged, the visibility map set for index-only scans).
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sa.text("VACUUM ANALYZE"))
    print(f"  (built in {time.perf_counter() - began:.1f} s)")
    last = -(-args.tasks // 50)
    line("queue_page (page 1)", median_ms(lambda: views.queue_page(ledger), args.repeat))
    line(
        "queue_page (status=held)",
        median_ms(lambda: views.queue_page(ledger, status="held"), args.repeat),
    )
    line(
        f"queue_page (page {last})",
        median_ms(lambda: views.queue_page(ledger, page=last), args.repeat),
    )
    for name, params in QUEUE_VIEWS:
        view = QueueQuery.of(params, STATUS_FILTERS)
        line(
            f"queue_page ({name})",
            median_ms(lambda v=view: views.queue_page(ledger, query=v), args.repeat),  # type: ignore[misc]
        )
    run = views.run_view(ledger, BIG_RUN, state_dir=None)
    assert run is not None and len(run.attempts) == args.attempts
    line(
        f"run_view ({args.attempts} attempts x {args.seats} seats)",
        median_ms(lambda: views.run_view(ledger, BIG_RUN, state_dir=None), args.repeat),
    )
    client = TestClient(
        create_app(bench_config(ledger)),
        base_url="http://127.0.0.1:8765",
        headers=BEARER,
    )

    def get(path: str) -> Callable[[], object]:
        def call() -> object:
            response = client.get(path)
            assert response.status_code == 200, (path, response.status_code)
            return response

        return call

    line("GET / (rendered)", median_ms(get("/"), args.repeat))
    line("GET /?status=held (rendered)", median_ms(get("/?status=held"), args.repeat))
    line("GET /?sort=cost (rendered)", median_ms(get("/?sort=cost"), args.repeat))
    line("GET /?held_by=halt (rendered)", median_ms(get("/?held_by=halt"), args.repeat))
    shared = "/?q=number+4242&coder=claude&sort=updated&dir=asc"
    line("GET " + shared[:31] + "… (rendered)", median_ms(get(shared), args.repeat))
    line("GET /?sort=attempts (rendered)", median_ms(get("/?sort=attempts"), args.repeat))
    line(f"GET /runs/{BIG_RUN} (rendered)", median_ms(get(f"/runs/{BIG_RUN}"), args.repeat))
    line(f"GET /tasks/{BIG_TASK} (rendered)", median_ms(get(f"/tasks/{BIG_TASK}"), args.repeat))
    line("GET /halts (rendered)", median_ms(get("/halts"), args.repeat))
    latencies = sse_latency(ledger, args.sse_samples)
    line(
        "append_event -> GET /events yields it",
        statistics.median(latencies) * 1000,
        SSE_TARGET_MS,
    )
    print(f"  {'':<38} max    {max(latencies) * 1000:8.2f} ms   ({len(latencies)} samples)")


@contextmanager
def sqlite_ledger() -> Iterator[tuple[Ledger, sa.Engine]]:
    with tempfile.TemporaryDirectory(prefix="assay-bench-web-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'assay.db'}"
        ledger = Ledger.open(url)
        engine = make_engine(url)
        try:
            yield ledger, engine
        finally:
            engine.dispose()
            ledger.close()


@contextmanager
def postgres_ledger(url: str) -> Iterator[tuple[Ledger, sa.Engine]]:
    with bench_schema(url) as schema:
        ledger = Ledger.open(url, schema=schema)
        engine = make_engine(url, schema=schema)
        try:
            yield ledger, engine
        finally:
            engine.dispose()
            ledger.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000, help="tasks in the queue")
    parser.add_argument("--attempts", type=int, default=20, help="attempts of the big run")
    parser.add_argument("--seats", type=int, default=3, help="seats of each attempt")
    parser.add_argument("--repeat", type=int, default=25, help="timed calls per figure")
    parser.add_argument("--sse-samples", type=int, default=10, help="events timed on /events")
    parser.add_argument("--postgres", help=f"PostgreSQL URL (default: ${POSTGRES_ENV})")
    parser.add_argument("--skip-sqlite", action="store_true", help="PostgreSQL's figures only")
    args = parser.parse_args()
    if min(args.tasks, args.attempts, args.seats, args.repeat, args.sse_samples) < 1:
        parser.error("every count must be at least 1")
    print(
        f"{args.tasks} tasks; a run of {args.attempts} attempts x {args.seats} seats; "
        f"medians of {args.repeat} calls"
    )
    on_each_backend(bench, args)


def on_each_backend(
    measure: Callable[[Ledger, sa.Engine, argparse.Namespace], None], args: argparse.Namespace
) -> None:
    """``measure`` on SQLite (unless ``--skip-sqlite``), then on PostgreSQL when a URL is given
    (``--postgres`` or ``$ASSAY_TEST_POSTGRES_URL``)."""
    if not args.skip_sqlite:
        print("sqlite")
        with sqlite_ledger() as (ledger, engine):
            measure(ledger, engine, args)
    url = args.postgres or os.environ.get(POSTGRES_ENV)
    if url:
        print("postgresql")
        with postgres_ledger(url) as (ledger, engine):
            measure(ledger, engine, args)
    else:
        print(f"postgresql skipped: give --postgres URL or set {POSTGRES_ENV}")


if __name__ == "__main__":
    main()
