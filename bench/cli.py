"""How long the ``assay`` commands people and coders call often take, beside ``python -c pass``.

Every figure is the median wall time of ``--runs`` cold processes, measured in one run of this
script and in rounds (each round runs every command once), so a machine that gets busier part
way through weighs on all of them alike; each is printed with its ratio to ``python -c pass``
and its target, PASS or MISS:

    python -c pass                               1x (the yardstick)
    assay --version, assay --help                <= 5x
    assay halt check (an armed dispatch)         <= 4x
    assay task list, assay task show ID          <= 12x, over a ledger of 10,000 tasks
    assay run (replay coder, `true` validator)   <= 20x

The ledger is filled in this process through :class:`Ledger` (one ``add_task`` per task, a
tenth of them held with a reason), not by 10,000 ``assay task add`` processes. The children
run without ``PYTHONDONTWRITEBYTECODE`` and every command runs once untimed first, so the
bytecode is written and the page cache warm before anything is timed.

``--breakdown`` adds, without targets, the cold import of what the slow paths are made of
(typer with the pydantic it builds parameters with, pydantic alone, SQLAlchemy, detect-secrets'
plugins, and every module an instant run imports before it starts working), so a MISS can be
read against the floor those packages set.

Usage: ``.venv/bin/python bench/cli.py [--runs 10] [--tasks 10000] [--breakdown] [--json]``;
exits 1 when a figure misses its target (``--no-fail`` to always exit 0).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASSAY = str(Path(sys.executable).parent / "assay")
sys.path.insert(0, str(ROOT / "tests"))

from _timing import INSTANT_CONTRACT, child_env  # noqa: E402
from support.repo import make_repo  # noqa: E402


@dataclass(frozen=True)
class Case:
    key: str
    label: str
    argv: Sequence[str]
    cwd: Path
    target: float | None  # the ratio to `python -c pass` it must stay under (None: yardstick)
    codes: tuple[int, ...] = (0,)


def run_once(case: Case, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        case.argv, cwd=case.cwd, env=env, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - start
    if done.returncode not in case.codes:
        raise SystemExit(f"{case.label} failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall


def fill_ledger(home: Path, count: int) -> str:
    """A ledger of ``count`` tasks under ``home`` (a tenth held); the id of one in the middle."""
    from assay.adapters.store.sql import Ledger
    from assay.core.tasks import Task

    now = datetime.now(UTC)
    middle = ""
    with Ledger.open(f"sqlite:///{home / 'assay.db'}") as ledger:
        for n in range(count):
            task = Task.new(
                id=f"t20260101-000000-{n:08x}",
                title=f"Task number {n}: make slugify keep digits",
                instruction=f"Task number {n}: make slugify keep digits.",
                now=now,
            )
            if n % 10 == 9:
                task.hold("waiting for a human to look at the flaky test", now)
            ledger.add_task(task, contract={"task": task.instruction})
            if n == count // 2:
                middle = task.id
    return middle


def cases(work: Path, tasks: int) -> list[Case]:
    env = child_env()
    repo = make_repo(work / "run")
    contract = repo.contract("instant.yaml", INSTANT_CONTRACT)
    halts = work / "halts"
    halts.mkdir()
    arm = [ASSAY, "halt", "arm", "--contract", str(ROOT / "examples" / "contract.yaml")]
    subprocess.run([*arm, "--dispatch-id", "bench"], cwd=halts, env=env, check=True,
                   capture_output=True)  # fmt: skip
    big = make_repo(work / "big").root  # task commands work in a repository
    started = time.perf_counter()
    middle = fill_ledger(big / ".assay", tasks)
    print(f"(ledger of {tasks} tasks built in {time.perf_counter() - started:.1f} s)",
          file=sys.stderr)  # fmt: skip
    check = [ASSAY, "halt", "check", "--dispatch-id", "bench", "--condition", "halt-scope-breach"]
    return [
        Case("python_c_pass", "python -c pass", [sys.executable, "-c", "pass"], work, None),
        Case("version", "assay --version", [ASSAY, "--version"], work, 5),
        Case("help", "assay --help", [ASSAY, "--help"], work, 5),
        Case("halt_check", "assay halt check", check, halts, 4),
        Case("task_list", f"assay task list ({tasks} tasks)", [ASSAY, "task", "list"], big, 12),
        Case(
            "task_show",
            f"assay task show ({tasks} tasks)",
            [ASSAY, "task", "show", middle],
            big,
            12,
        ),
        Case(
            "run", "assay run (instant)", [ASSAY, "run", "--contract", str(contract)], repo.root, 20
        ),
    ]


# What the slow paths are made of: each imported alone in a fresh interpreter.
BREAKDOWN = {
    "import_typer": ("import typer (+ its pydantic)", "import typer, typer._adapters"),
    "import_pydantic": ("import pydantic", "import pydantic"),
    "import_sqlalchemy": ("import sqlalchemy", "import sqlalchemy"),
    "import_detect_secrets": (
        "import detect-secrets' plugins",
        "import detect_secrets.core.scan",
    ),
    "import_run_path": (
        "import what run needs to start",
        "import typer._adapters, assay.cli.run, assay.engine.local.runner, assay.cli.progress",
    ),
}


def breakdown_cases(work: Path) -> list[Case]:
    return [
        Case(key, label, [sys.executable, "-c", code], work, None)
        for key, (label, code) in BREAKDOWN.items()
    ]


def measure(all_cases: list[Case], runs: int) -> dict[str, float]:
    env = child_env()
    for case in all_cases:  # bytecode written, page cache warm, ledger migrated
        run_once(case, env)
    samples: dict[str, list[float]] = {c.key: [] for c in all_cases}
    for _ in range(runs):
        for case in all_cases:
            samples[case.key].append(run_once(case, env))
    return {key: statistics.median(walls) for key, walls in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="timed runs of each command")
    parser.add_argument("--tasks", type=int, default=10_000, help="tasks in the big ledger")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even on a MISS")
    parser.add_argument("--breakdown", action="store_true", help="time the heavy imports too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        all_cases = cases(Path(tmp), args.tasks)
        if args.breakdown:
            all_cases += breakdown_cases(Path(tmp))
        medians = measure(all_cases, args.runs)
    base = medians["python_c_pass"]
    rows = []
    for case in all_cases:
        ratio = medians[case.key] / base
        verdict = None if case.target is None else ("PASS" if ratio <= case.target else "MISS")
        rows.append(
            {
                "key": case.key,
                "command": case.label,
                "median_ms": round(medians[case.key] * 1000, 1),
                "ratio": round(ratio, 2),
                "target": case.target,
                "verdict": verdict,
            }
        )
    missed = [r["key"] for r in rows if r["verdict"] == "MISS"]
    if args.json:
        print(json.dumps({"runs": args.runs, "tasks": args.tasks, "figures": rows}))
    else:
        print(f"medians of {args.runs} cold runs each; ratio to python -c pass")
        for r in rows:
            target = "" if r["target"] is None else f"target <= {r['target']}x"
            verdict = r["verdict"] or ""
            print(f"  {r['command']:<38} {r['median_ms']:>8.1f} ms {r['ratio']:>6.2f}x  "
                  f"{target:<15} {verdict}")  # fmt: skip
    sys.exit(1 if missed and not args.no_fail else 0)


if __name__ == "__main__":
    main()
