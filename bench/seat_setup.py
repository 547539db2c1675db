"""A seat's set-up: its own repository (``git init`` + alternates + checkout of the base, as
:func:`assay.adapters.seats.create_seat` makes it) against ``git worktree add`` (what seats
were before), on a generated repository of 5,000 files. Target: at most 1.5x a worktree.

Each figure is the median wall time of N set-ups, each followed (untimed) by its removal,
the two kinds taking turns.
``seat_setup(runs)`` is what ``bench/sandbox.py`` reports beside the process start-up.

Usage: ``.venv/bin/python bench/seat_setup.py [--runs 10] [--files 5000] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from assay.adapters import git, seats  # noqa: E402

TARGET_RATIO = 1.5


def generated_repo(root: Path, files: int) -> Path:
    """A repository of ``files`` small text files in folders of 100, one commit."""
    repo = root / "repo"
    for n in range(files):
        path = repo / f"pkg{n // 100:03d}" / f"mod{n:05d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'"""Module {n}."""\n\nVALUE = {n}\n' + "# filler line\n" * 20)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "b"],
        check=True,
    )
    git.ensure_excluded(repo)
    return repo


def _medians_ms(
    pairs: list[tuple[Callable[[int], object], Callable[[int], object]]], runs: int
) -> list[float]:
    """The median of each (make, undo) pair's ``make``, the pairs interleaved run by run so
    that the machine's drift (other work, disk write-back) falls on all of them alike."""
    for make, undo in pairs:  # warm the caches once, untimed
        make(-1)
        undo(-1)
    samples: list[list[float]] = [[] for _ in pairs]
    for n in range(runs):
        for index, (make, undo) in enumerate(pairs):
            start = time.perf_counter()
            make(n)
            samples[index].append(time.perf_counter() - start)
            undo(n)
            os.sync()  # the removal's write-back is not charged to the next set-up
    return [statistics.median(s) * 1000 for s in samples]


def seat_setup(runs: int, files: int = 5000) -> list[dict[str, object]]:
    """The two set-ups' medians (ms) and their ratio, as dicts (name, median_ms, runs, note)."""
    with tempfile.TemporaryDirectory(prefix="assay-bench-seats-") as tmp:
        repo = generated_repo(Path(tmp), files)
        base = git.head_commit(repo)
        home = repo / ".assay"

        def worktree(n: int) -> Path:
            return home / "worktrees" / "r1" / f"seat-{n}"

        def add_worktree(n: int) -> None:
            git.add_worktree(repo, worktree(n), base, f"assay/r1/w{n}")

        def remove_worktree(n: int) -> None:
            git.remove_worktree(repo, worktree(n), branch=f"assay/r1/w{n}")

        def add_seat(n: int) -> None:
            path = seats.seat_path(home, "r1", f"seat-{n}")
            seats.create_seat(repo, path, base, git.seat_branch("r1", f"seat-{n}"))

        def remove_seat(_n: int) -> None:
            shutil.rmtree(seats.seats_root(home, "r1"))

        tree, seat = _medians_ms([(add_worktree, remove_worktree), (add_seat, remove_seat)], runs)
    ratio = seat / tree
    verdict = "ok" if ratio <= TARGET_RATIO else "OVER"
    note = f"; {ratio:.2f}x a worktree, target <= {TARGET_RATIO}x: {verdict}"
    return [
        {"name": f"git worktree add ({files} files)", "median_ms": tree, "runs": runs, "note": ""},
        {"name": f"seat repository ({files} files)", "median_ms": seat, "runs": runs, "note": note},
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = seat_setup(args.runs, args.files)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for figure in figures:
        print(
            f"{figure['name']}: {figure['median_ms']:.1f} ms "
            f"(median of {figure['runs']}){figure['note']}"
        )


if __name__ == "__main__":
    main()
