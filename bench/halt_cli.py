"""Median wall time of cold ``assay halt check`` calls beside ``python -c pass``.

A coder calls ``assay halt check`` in the middle of its turn, so a cold start must be quick.
Usage: ``.venv/bin/python bench/halt_cli.py [--runs 20]``.
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
ASSAY = Path(sys.executable).parent / "assay"


def median_ms(argv: list[str], runs: int, cwd: Path) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, check=False)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        arm = [str(ASSAY), "halt", "arm", "--contract", str(ROOT / "examples" / "contract.yaml")]
        subprocess.run([*arm, "--dispatch-id", "bench"], cwd=work, check=True, capture_output=True)
        check = [str(ASSAY), "halt", "check", "--dispatch-id", "bench"]
        median_ms([*check, "--condition", "halt-scope-breach"], 2, work)  # warm the page cache
        figures = {
            "python_c_pass_ms": median_ms([sys.executable, "-c", "pass"], args.runs, work),
            "halt_check_ms": median_ms(
                [*check, "--condition", "halt-scope-breach"], args.runs, work
            ),
            "runs": args.runs,
        }
    if args.json:
        print(json.dumps(figures))
        return
    print(f"python -c pass     median of {args.runs}: {figures['python_c_pass_ms']:.1f} ms")
    print(
        f"assay halt check   median of {args.runs}: {figures['halt_check_ms']:.1f} ms"
        "  (goal < 150 ms)"
    )


if __name__ == "__main__":
    main()
