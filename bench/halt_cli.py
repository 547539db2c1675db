"""Median wall time of cold ``assay halt check`` calls, and its ratio to ``python -c pass``.

A coder calls ``assay halt check`` in the middle of its turn, so a cold start must cost little
more than the interpreter's: the target is at most 4x the venv's ``python -c pass``, measured
in the same run. The two commands are timed in alternation, so a machine whose load changes
during the run slows both alike. Children run with bytecode writing allowed (and the bytecode
warmed first): with ``PYTHONDONTWRITEBYTECODE`` set every call would compile assay's sources
again and the figure would mean nothing.

Usage: ``.venv/bin/python bench/halt_cli.py [--runs 20] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASSAY = Path(sys.executable).parent / "assay"
TARGET_RATIO = 4.0
CONDITION = "halt-scope-breach"


def child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench: {' '.join(argv)} exited {done.returncode}")
    return elapsed


def measure(runs: int) -> dict[str, float | int | str | bool]:
    env = child_env()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        contract = ROOT / "examples" / "contract.yaml"
        arm = [str(ASSAY), "halt", "arm", "--contract", str(contract), "--dispatch-id", "bench"]
        subprocess.run(arm, cwd=work, env=env, check=True, capture_output=True)
        check = [str(ASSAY), "halt", "check", "--dispatch-id", "bench", "--condition", CONDITION]
        baseline = [sys.executable, "-c", "pass"]
        for _ in range(3):  # write the bytecode, warm the page cache; the first check applies
            timed(check, work, env)
            timed(baseline, work, env)
        passes, checks = [], []
        for _ in range(runs):
            passes.append(timed(baseline, work, env))
            checks.append(timed(check, work, env))
    python_ms = statistics.median(passes) * 1000
    check_ms = statistics.median(checks) * 1000
    ratio = check_ms / python_ms
    return {
        "python_c_pass_ms": round(python_ms, 2),
        "halt_check_ms": round(check_ms, 2),
        "ratio": round(ratio, 2),
        "target_ratio": TARGET_RATIO,
        "verdict": "PASS" if ratio <= TARGET_RATIO else "MISS",
        "runs": runs,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count() or 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="timed calls of each (default 20)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    figures = measure(args.runs)
    if args.json:
        print(json.dumps(figures))
        return
    runs = figures["runs"]
    print(f"python -c pass     median of {runs}: {figures['python_c_pass_ms']:7.1f} ms")
    print(
        f"assay halt check   median of {runs}: {figures['halt_check_ms']:7.1f} ms   "
        f"{figures['ratio']:.2f}x python -c pass (target <= {TARGET_RATIO:g}x): "
        f"{figures['verdict']}"
    )
    print(
        f"load average (1 min) at the end: {figures['load_average_1m']} on {figures['cpus']} CPUs"
    )


if __name__ == "__main__":
    main()
