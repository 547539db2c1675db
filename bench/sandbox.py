"""What the sandbox costs: a process's start-up under bwrap beside the same process unconfined.

The bwrap command line is the one :mod:`assay.adapters.sandbox` builds for a typical seat (its
repository, log and halt folders writable, a private home, the operator's home and the user's
repository hidden, the shared object store readable, this machine's PATH). Each figure is the
median wall time of N runs of ``true``; the target is at most 20 ms per process on top.

Usage: ``.venv/bin/python bench/sandbox.py [--runs 50] [--json]``. One line per measurement;
:func:`seat_setup` adds the seat set-up comparison (seat repository against worktree).
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
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from assay.adapters.process import run_process  # noqa: E402
from assay.adapters.sandbox import bwrap_command, bwrap_path, prepare, sandbox_env  # noqa: E402
from assay.adapters.sandbox_spec import SandboxSpec  # noqa: E402

PROCESS_TARGET_MS = 20.0


@dataclass
class Measurement:
    name: str
    median_ms: float
    runs: int
    note: str = ""

    def line(self) -> str:
        return f"{self.name}: {self.median_ms:.1f} ms (median of {self.runs}){self.note}"


def median_ms(action: Callable[[], object], runs: int) -> float:
    action()  # warm the caches once, untimed
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def typical_seat(root: Path) -> tuple[SandboxSpec, Path]:
    """A seat laid out as the engine lays it out, under ``root``; the spec and the seat."""
    repo = root / "repo"
    seat = repo / ".assay" / "seats" / "r1" / "seat-1"
    logs = repo / ".assay" / "runs" / "r1" / "attempt-1" / "seat-1"
    halt = repo / ".assay" / "halt-state"
    objects = repo / ".git" / "objects"
    home = root / "operator-home"
    for folder in (seat, logs, halt, objects, home):
        folder.mkdir(parents=True, exist_ok=True)
    spec = SandboxSpec(
        writable=(seat, logs, halt),
        readable=(objects,),
        hidden=(home, repo, Path.home()),
        home=seat.parent / "seat-1.home",
    )
    prepare(spec)
    return spec, seat


def process_startup(runs: int) -> list[Measurement]:
    """``true`` unconfined and under bwrap, bare and through :func:`run_process`."""
    bwrap = bwrap_path()
    if bwrap is None:
        raise SystemExit("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(Path.home())}
    with tempfile.TemporaryDirectory(prefix="assay-bench-sandbox-") as tmp:
        spec, seat = typical_seat(Path(tmp))
        inner = sandbox_env(spec, env)
        confined = bwrap_command(spec, ["true"], env=inner, cwd=seat, bwrap=bwrap)
        logs = Path(tmp) / "logs"

        def bare(argv: list[str], environ: dict[str, str]) -> Callable[[], object]:
            return lambda: subprocess.run(argv, cwd=seat, env=environ, check=True)

        def runner(sandbox: SandboxSpec | None) -> Callable[[], object]:
            return lambda: run_process(
                ["true"], cwd=seat, env=env, timeout=30, log_path=logs / "p.log", sandbox=sandbox
            )

        plain = median_ms(bare(["true"], env), runs)
        boxed = median_ms(bare(confined, inner), runs)
        plain_run = median_ms(runner(None), runs)
        boxed_run = median_ms(runner(spec), runs)
    binds = sum(1 for arg in confined if arg in ("--bind", "--ro-bind-try", "--tmpfs"))
    verdict = "ok" if boxed - plain <= PROCESS_TARGET_MS else "OVER"
    return [
        Measurement("true", plain, runs),
        Measurement(
            "bwrap ... true",
            boxed,
            runs,
            f"; +{boxed - plain:.1f} ms per process, target <= {PROCESS_TARGET_MS:.0f} ms: "
            f"{verdict} ({binds} mounts)",
        ),
        Measurement("run_process(true)", plain_run, runs),
        Measurement(
            "run_process(true, sandbox=seat)",
            boxed_run,
            runs,
            f"; +{boxed_run - plain_run:.1f} ms",
        ),
    ]


def seat_setup(runs: int) -> list[Measurement]:
    """A seat's set-up (its own repository) against a worktree on 5,000 files
    (``bench/seat_setup.py``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from seat_setup import seat_setup as measure

    return [Measurement(**figure) for figure in measure(runs)]  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = [*process_startup(args.runs), *seat_setup(max(args.runs // 10, 3))]
    if args.json:
        print(json.dumps([asdict(m) for m in figures], indent=2))
        return
    for measurement in figures:
        print(measurement.line())


if __name__ == "__main__":
    main()
