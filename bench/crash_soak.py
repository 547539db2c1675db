"""Crash soak: kill real runs at random moments, resume them, check every invariant.

Each trial queues a task in a fresh temporary repository (a 1- or 2-seat merge of a command
coder that takes a moment, a command validator), starts ``assay run --task`` in its own
process group, SIGKILLs that group — and every coder group it started, as a machine crash
would — at a random moment, then runs ``assay run --resume``. A task the kill caught before
its run started is still queued and is then worked by ``assay serve --once``. Then it checks
(``tests/support/crash.py``): main holds the change exactly once, the ledger's counts are the
dispatches that started, no run open and no task running, no seat repository or ``assay/*``
branch left, every payload valid JSON and agreeing with the ledger.

The kill moment is uniform between the command's start-up (the time of ``assay task list``)
and the length of one uncrashed run, both timed first (or ``--max-delay``).
Prints ``N/N resumed exact``, where the kills landed, and any failures.
Usage: ``.venv/bin/python bench/crash_soak.py [--trials 30] [--seed S] [--max-delay SECONDS]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.crash import crash_contract, invariant_failures, landings  # noqa: E402
from support.repo import ASSAY, Repo, make_repo  # noqa: E402


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}


def trial(
    work: Path, rng: random.Random, min_delay: float, max_delay: float
) -> tuple[str, list[str]]:
    """One kill and resume; (where the kill landed, the invariants that failed)."""
    repo = make_repo(work)
    pids = work / "coders.pid"
    coder = f"echo $$ >> {pids}; sleep 0.2; echo change >> src/notes.txt"
    contract = crash_contract(repo, rng.choice((1, 2)), coder=coder)
    added = repo.assay("task", "add", "--contract", str(contract), "--json")
    if added.returncode != 0:
        return "setup", [f"task add failed: {added.stderr.strip()}"]
    task_id = json.loads(added.stdout)["id"]
    base = landings(repo.root)
    victim = subprocess.Popen(
        [str(ASSAY), "run", "--task", task_id],
        cwd=repo.root,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    time.sleep(rng.uniform(min_delay, max_delay))
    finished = victim.poll() is not None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    for pid in pids.read_text().split() if pids.exists() else []:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(pid), signal.SIGKILL)  # coders run in groups of their own
    resumed = repo.assay("run", "--resume")
    failures = [] if resumed.returncode == 0 else [f"resume exit {resumed.returncode}"]
    where = "after the run" if finished else phase(repo, resumed.stderr)
    if status(repo, task_id) != "done":
        served = repo.assay("serve", "--once", "--poll", "0.1")
        if served.returncode != 0:
            failures.append(f"serve exit {served.returncode}: {served.stderr[-300:]}")
    return where, failures + invariant_failures(repo, base_landings=base)


def one_run_seconds(work: Path) -> float:
    """Wall time of one uncrashed 1-seat run of the soak's contract (the shorter kind)."""
    repo = make_repo(work)
    contract = crash_contract(repo, 1, coder="sleep 0.2; echo change >> src/notes.txt")
    start = time.perf_counter()
    done = repo.assay("run", "--contract", str(contract))
    if done.returncode != 0:
        raise SystemExit(f"the uncrashed run failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.perf_counter() - start


def startup_seconds(work: Path) -> float:
    """How long the command takes before a run could start: ``assay task list``."""
    repo = make_repo(work)
    repo.assay("task", "list")
    start = time.perf_counter()
    repo.assay("task", "list")
    return time.perf_counter() - start


def phase(repo: Repo, stderr: str) -> str:
    return "during the run (recovered)" if "recovered" in stderr else "before the run started"


def status(repo: Repo, task_id: str) -> str:
    shown = repo.assay("task", "show", task_id, "--json")
    return str(json.loads(shown.stdout)["status"]) if shown.returncode == 0 else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--max-delay", type=float, default=None, help="latest kill, seconds")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    where: Counter[str] = Counter()
    failed: list[tuple[int, list[str]]] = []
    with tempfile.TemporaryDirectory(prefix="assay-soak-") as tmp:
        max_delay = args.max_delay or one_run_seconds(Path(tmp) / "calibrate")
        min_delay = min(startup_seconds(Path(tmp) / "startup"), max_delay)
        for n in range(1, args.trials + 1):
            landed, failures = trial(Path(tmp) / f"t{n}", rng, min_delay, max_delay)
            where[landed] += 1
            if failures:
                failed.append((n, failures))
    exact = args.trials - len(failed)
    window = f"kills at {min_delay:.2f}-{max_delay:.2f} s"
    print(f"{exact}/{args.trials} resumed exact (seed {seed}, {window})")
    print("kills: " + ", ".join(f"{count} {w}" for w, count in sorted(where.items())))
    for n, failures in failed:
        print(f"trial {n}: " + "; ".join(failures))
    raise SystemExit(0 if not failed else 1)


if __name__ == "__main__":
    main()
