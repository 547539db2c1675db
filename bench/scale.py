"""How the Temporal executor scales, and what it costs per run over the local one.

100 instant tasks (a ``replay`` coder that writes one file, ``true`` as the only validator,
``land: none``) are queued three times, each time in a fresh repository and a fresh PostgreSQL
database (both executors on the same ledger, so the difference is the executor alone):

1. the local executor: ``assay serve --once`` with one run at a time;
2. Temporal with one worker (``assay worker --temporal``, its own process), then
3. with two workers (separate processes, each its own home, as on two machines); each worker
   runs one task at a time (``--max-dispatches 1``), so the figure is how the queue spreads
   over workers, not how one machine's cores do (2 cores shared here).

Timed: ``assay serve [--temporal] --once`` from its start until every task is done (queueing
the tasks and starting the server and workers are not). Printed: tasks per minute for each,
the speed-up of two workers over one (target >= 1.7x) and the Temporal executor's per-run
overhead over the local one, (1-worker time - local time) / tasks (target <= 0.3 s).

Usage: ``.venv/bin/python bench/scale.py [--tasks 100] [--postgres URL] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import sqlalchemy as sa  # noqa: E402
from _timing import INSTANT_CONTRACT  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402
from support.repo import make_repo  # noqa: E402
from support.temporal import DevServer  # noqa: E402
from support.workers import Worker, add_task, assay, service_env, show  # noqa: E402

SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
TARGET_SPEEDUP = 1.7
TARGET_OVERHEAD_S = 0.3


class Database:
    """A database of our own on the server, dropped at the end."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.name = f"assay_bench_{secrets.token_hex(4)}"
        self.url = make_url(server).set(database=self.name).render_as_string(hide_password=False)
        self._admin("CREATE")

    def _admin(self, verb: str) -> None:
        engine = sa.create_engine(self.server, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            suffix = " WITH (FORCE)" if verb == "DROP" else ""
            conn.execute(sa.text(f'{verb} DATABASE "{self.name}"{suffix}'))
        engine.dispose()

    def drop(self) -> None:
        self._admin("DROP")


def queue_tasks(repo: Path, contract: Path, env: dict[str, str], count: int) -> list[str]:
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda _: add_task(repo, contract, env), range(count)))


def check_done(repo: Path, env: dict[str, str], ids: list[str]) -> None:
    listed = {t["id"]: t["status"] for t in show(repo, "task", "list", env=env)}
    missing = [i for i in ids if listed.get(i) != "done"]
    if missing:
        raise SystemExit(f"{len(missing)} of {len(ids)} tasks not done: {missing[:5]}")


@dataclass
class Timed:
    seconds: float
    cpu_seconds: float  # of assay's processes (serve, workers and what they ran), not the server
    load: float  # the machine's 1-minute load average at the end: other work competes for cores


def phase(work: Path, server: str, count: int, workers: int, address: str | None) -> Timed:
    """Time to work ``count`` queued tasks: locally (``address`` None) or on Temporal."""
    database = Database(server)
    try:
        repo = make_repo(work)
        contract = repo.contract("instant.yaml", INSTANT_CONTRACT)
        env = service_env(database.url)
        ids = queue_tasks(repo.root, contract, env, count)
        before = _children_cpu()
        if address is None:
            start = time.perf_counter()
            done = assay(repo.root, "serve", "--once", "--poll", "0.2", env=env, timeout=3600)
            elapsed = time.perf_counter() - start
            _served(done)
        else:
            queue = f"bench-{uuid.uuid4().hex[:8]}"
            started = [
                Worker(address, repo.root, work / f"machine-{n}", database.url, queue, 1)
                for n in range(1, workers + 1)
            ]
            elapsed = serve_temporal(repo.root, started, address, queue, env)
        check_done(repo.root, env, ids)
        return Timed(elapsed, _children_cpu() - before, os.getloadavg()[0])
    finally:
        database.drop()


def serve_temporal(
    submitter: Path, workers: list[Worker], address: str, queue: str, env: dict[str, str]
) -> float:
    """Start ``workers``, then the seconds ``assay serve --temporal --once`` takes from
    ``submitter`` to see every queued task through; the workers are stopped after."""
    try:
        for worker in workers:
            worker.start()
        start = time.perf_counter()
        done = assay(
            submitter, "serve", "--temporal", address, "--task-queue", queue, "--once",
            env=env, timeout=3600,
        )  # fmt: skip
        elapsed = time.perf_counter() - start
    finally:
        for worker in workers:
            worker.stop()
    _served(done)
    return elapsed


def _served(done: subprocess.CompletedProcess[str]) -> None:
    if done.returncode != 0:
        raise SystemExit(f"assay serve failed ({done.returncode}): {done.stderr[-2000:]}")


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--postgres", default=os.environ.get("ASSAY_TEST_POSTGRES_URL", SERVER))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="assay-scale-") as tmp:
        work = Path(tmp)
        local = phase(work / "local", args.postgres, args.tasks, 0, None)
        with DevServer(work / "temporal") as server:
            one = phase(work / "one", args.postgres, args.tasks, 1, server.address)
            two = phase(work / "two", args.postgres, args.tasks, 2, server.address)
    phases = {"local": local, "1": one, "2": two}
    per_minute = {name: args.tasks / t.seconds * 60 for name, t in phases.items()}
    speedup = one.seconds / two.seconds
    overhead = (one.seconds - local.seconds) / args.tasks
    figures: dict[str, object] = {"tasks": args.tasks, "cores": os.cpu_count()}
    for name, t in phases.items():
        figures[f"{name}_s"] = round(t.seconds, 2)
        figures[f"{name}_tasks_per_minute"] = round(per_minute[name], 1)
        figures[f"{name}_cpu_s_per_task"] = round(t.cpu_seconds / args.tasks, 3)
        figures[f"{name}_load"] = round(t.load, 2)
    figures["speedup_2_over_1"] = round(speedup, 2)
    figures["temporal_overhead_per_run_s"] = round(overhead, 3)
    figures["speedup_target"] = TARGET_SPEEDUP
    figures["overhead_target_s"] = TARGET_OVERHEAD_S
    if args.json:
        print(json.dumps(figures))
        return
    print(
        f"{args.tasks} instant tasks, one run at a time per executor / worker, on PostgreSQL; "
        f"{os.cpu_count()} cores"
    )
    names = {"local": "local executor", "1": "Temporal, 1 worker", "2": "Temporal, 2 workers"}
    for name, t in phases.items():
        print(
            f"  {names[name] + ':':21} {per_minute[name]:7.1f} tasks/min ({t.seconds:.1f} s; "
            f"{t.cpu_seconds / args.tasks:.2f} CPU s per task; load {t.load:.1f} at the end)"
        )
    verdict = "met" if speedup >= TARGET_SPEEDUP else "MISSED"
    print(f"  2 workers over 1:     {speedup:.2f}x (target >= {TARGET_SPEEDUP}x: {verdict})")
    verdict = "met" if overhead <= TARGET_OVERHEAD_S else "MISSED"
    print(
        f"  Temporal per-run overhead over local: {overhead:.3f} s "
        f"(target <= {TARGET_OVERHEAD_S} s: {verdict})"
    )


if __name__ == "__main__":
    main()
