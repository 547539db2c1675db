"""Many machines landing on one origin: how the leased push scales over workers.

N tasks (default 40), each adding a file of its own (no two conflict), ``land: merge``, are
queued from the user's clone of a bare origin and served by Temporal workers, each in a clone
of its own with a home of its own (as on separate machines; ``--max-dispatches 1``), first one
worker, then two. Every landing is a fetch, a squash on the origin's tip and a push leased on
that tip; a push that lost to the other worker fetches, combines and validates again.

Printed: tasks per minute for each, the speed-up of two workers over one, and the landings on
the origin checked: exactly N, one straight line, every task once.

Usage: ``.venv/bin/python bench/origin.py [--tasks 40] [--postgres URL] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from scale import SERVER, Database, queue_tasks, serve_temporal  # noqa: E402
from support.repo import git, make_repo_with_origin  # noqa: E402
from support.temporal import DevServer  # noqa: E402
from support.workers import Worker, service_env  # noqa: E402

# Each run adds a file named by a fresh UUID: no two tasks' changes conflict.
CONTRACT = """task: Add a note.
scope: {allow: ["notes/**"]}
coder: {kind: command, command: "mkdir -p notes && date +%N > notes/$(cat $UUID).txt"}
validators: [{id: note, kind: command, run: "ls notes/ | grep -q txt"}]
sandbox: none
land: merge
"""


def phase(work: Path, server: str, address: str, count: int, workers: int) -> float:
    """Seconds for ``workers`` clones to land ``count`` queued tasks on the origin."""
    database = Database(server)
    try:
        user = make_repo_with_origin(work)
        uuid_file = "/proc/sys/kernel/random/uuid"
        origin = work / "origin.git"
        git(origin, "symbolic-ref", "HEAD", "refs/heads/main")
        base = git(user.root, "rev-parse", "main")
        contract = user.contract("note.yaml", CONTRACT.replace("$UUID", uuid_file))
        env = service_env(database.url)
        ids = queue_tasks(user.root, contract, env, count)
        queue = f"origin-{uuid.uuid4().hex[:8]}"
        clones = [work / f"clone-{n}" for n in range(1, workers + 1)]
        for clone in clones:
            git(work, "clone", "-q", str(origin), str(clone))
        started = [
            Worker(address, clone, work / f"home-{n}", database.url, queue, 1)
            for n, clone in enumerate(clones, 1)
        ]
        elapsed = serve_temporal(user.root, started, address, queue, env)
        git(user.root, "fetch", "-q", "origin")
        trailers = git(user.root, "log", "--format=%(trailers:key=Assay-Task,valueonly)",
                       f"{base}..origin/main")  # fmt: skip
        landed = sorted(line for line in trailers.splitlines() if line.strip())
        line = git(user.root, "rev-list", "--first-parent", f"{base}..origin/main").split()
        if landed != sorted(ids) or len(line) != count:
            raise SystemExit(f"{len(landed)} of {count} tasks landed on the origin")
        return elapsed
    finally:
        database.drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--postgres", default=os.environ.get("ASSAY_TEST_POSTGRES_URL", SERVER))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="assay-origin-") as tmp:
        work = Path(tmp)
        with DevServer(work / "temporal") as server:
            one = phase(work / "one", args.postgres, server.address, args.tasks, 1)
            two = phase(work / "two", args.postgres, server.address, args.tasks, 2)
    figures = {
        "tasks": args.tasks,
        "cores": os.cpu_count(),
        "one_worker_s": round(one, 2),
        "two_workers_s": round(two, 2),
        "one_tasks_per_minute": round(args.tasks / one * 60, 1),
        "two_tasks_per_minute": round(args.tasks / two * 60, 1),
        "speedup_2_over_1": round(one / two, 2),
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(f"{args.tasks} tasks landed on one origin from separate clones; {os.cpu_count()} cores")
    print(f"  1 worker:  {figures['one_tasks_per_minute']:6.1f} tasks/min ({one:.1f} s)")
    print(f"  2 workers: {figures['two_tasks_per_minute']:6.1f} tasks/min ({two:.1f} s)")
    print(f"  2 over 1:  {one / two:.2f}x; every task landed once, in one straight line")


if __name__ == "__main__":
    main()
