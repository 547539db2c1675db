"""The engine's own cost per run, and the queue's throughput.

1. ``assay run`` with an instant ``replay`` coder and ``true`` as the only validator, 10 times:
   the median wall time of the whole command, and the part not spent in child processes
   (git, the coder, validators) — the engine's overhead. Child time is measured by timing every
   subprocess the run starts (``subprocess.Popen`` start to reap) in an in-process run of the
   same task, since a child's wall time is invisible from outside the ``assay`` process.
2. ``assay serve --concurrency 4 --once`` over 50 queued instant tasks: tasks per minute.

Usage: ``.venv/bin/python bench/overhead.py [--runs 10] [--tasks 50] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from _timing import INSTANT_CONTRACT, child_env, time_assay  # noqa: E402
from support.repo import git, make_repo  # noqa: E402


def cli_runs(work: Path, runs: int) -> list[float]:
    repo = make_repo(work / "cli")
    contract = repo.contract("instant.yaml", INSTANT_CONTRACT)
    return time_assay(repo, "run", "--contract", str(contract), runs=runs)


def child_time_in_process(work: Path) -> tuple[float, float]:
    """(wall of one in-process run, time spent in its child processes)."""
    from datetime import UTC, datetime

    from assay.adapters.store.sql import Ledger
    from assay.core.contract import parse_contract
    from assay.core.tasks import Task
    from assay.engine.local.runner import run_task

    repo = make_repo(work / "inproc")
    spent = [0.0]
    original_init, original_wait = subprocess.Popen.__init__, subprocess.Popen.wait

    def init(self: subprocess.Popen[bytes], *args: object, **kwargs: object) -> None:
        self._bench_start = time.perf_counter()  # type: ignore[attr-defined]
        original_init(self, *args, **kwargs)  # type: ignore[arg-type]

    def wait(self: subprocess.Popen[bytes], timeout: float | None = None) -> int:
        code = original_wait(self, timeout)
        start = getattr(self, "_bench_start", None)
        if start is not None:
            spent[0] += time.perf_counter() - start
            self._bench_start = None  # type: ignore[attr-defined]
        return code

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]
    subprocess.Popen.wait = wait  # type: ignore[method-assign]
    try:
        home = repo.root / ".assay"
        home.mkdir()
        ledger = Ledger.open(f"sqlite:///{home / 'assay.db'}")
        contract = parse_contract(INSTANT_CONTRACT)
        now = datetime.now(UTC)
        task = Task.new(id="bench", title="bench", instruction=contract.task, now=now)
        ledger.add_task(task)
        start = time.perf_counter()
        run_task(
            repo=repo.root, home=home, ledger=ledger, task=task, contract=contract, env=child_env()
        )
        wall = time.perf_counter() - start
    finally:
        subprocess.Popen.__init__ = original_init  # type: ignore[method-assign]
        subprocess.Popen.wait = original_wait  # type: ignore[method-assign]
    return wall, spent[0]


def serve_throughput(work: Path, tasks: int, concurrency: int) -> float:
    repo = make_repo(work / "serve")
    contract = repo.contract("instant.yaml", INSTANT_CONTRACT)
    time_assay(repo, "task", "add", "--contract", str(contract), runs=tasks)
    [elapsed] = time_assay(
        repo, "serve", "--concurrency", str(concurrency), "--once", "--poll", "0.2", runs=1
    )
    listed = repo.assay("task", "list", "--json")
    done = sum(1 for t in json.loads(listed.stdout) if t["status"] == "done")
    if done != tasks:
        raise SystemExit(f"only {done} of {tasks} tasks finished done")
    git(repo.root, "status")
    return tasks / elapsed * 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        walls = cli_runs(work, args.runs)
        inproc_wall, child = child_time_in_process(work)
        per_minute = serve_throughput(work, args.tasks, args.concurrency)
    median = statistics.median(walls)
    figures = {
        "runs": args.runs,
        "assay_run_median_s": round(median, 3),
        "in_process_run_s": round(inproc_wall, 3),
        "child_process_s": round(child, 3),
        "engine_overhead_s": round(median - child, 3),
        "serve_tasks": args.tasks,
        "serve_concurrency": args.concurrency,
        "serve_tasks_per_minute": round(per_minute, 1),
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(f"assay run, median of {args.runs}:      {median:.3f} s (goal < 1.5 s)")
    print(f"  in child processes (in-process run): {child:.3f} s of {inproc_wall:.3f} s")
    print(f"  engine overhead (median - children): {median - child:.3f} s")
    print(
        f"serve --concurrency {args.concurrency}, {args.tasks} tasks:   {per_minute:.1f} tasks/min"
    )


if __name__ == "__main__":
    main()
