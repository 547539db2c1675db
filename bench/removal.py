"""Removing a seat a coder shaped: :func:`assay.adapters.folders.remove_tree` against GNU
``rm -rf --one-file-system`` on a folder 1,100 and 5,000 levels deep (a file every 100) and
on 100,000 files in folders of 1,000. Target: at most 2x ``rm``, and no tree left.

Each figure is the median wall time of N removals of a freshly made tree (the making is not
timed), the two removers taking turns.

Usage: ``.venv/bin/python bench/removal.py [--runs 3] [--files 100000] [--json]``.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from assay.adapters.folders import remove_tree  # noqa: E402

TARGET_RATIO = 2.0


def deep(root: Path, depth: int) -> None:
    """``root/d/d/…`` ``depth`` deep, made relative to an open folder (no long path)."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for level in range(depth):
        os.mkdir("d", dir_fd=fd)
        below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = below
        if level % 100 == 0:
            os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.close(fd)


def wide(root: Path, files: int) -> None:
    """``files`` empty files in folders of 1,000."""
    root.mkdir()
    for start in range(0, files, 1000):
        folder = root / f"s{start // 1000}"
        folder.mkdir()
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        for n in range(start, min(files, start + 1000)):
            os.close(os.open(f"f{n}", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
        os.close(fd)


def timed(make: Callable[[Path], None], remove: Callable[[Path], object], place: Path) -> float:
    tree = place / "tree"
    make(tree)
    started = time.perf_counter()
    remove(tree)
    took = time.perf_counter() - started
    if os.path.lexists(tree):
        raise SystemExit(f"{tree} was not removed")
    return took


def rm(tree: Path) -> None:
    subprocess.run(["rm", "-rf", "--one-file-system", str(tree)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    shapes: dict[str, Callable[[Path], None]] = {
        "deep_1100": lambda p: deep(p, 1_100),
        "deep_5000": lambda p: deep(p, 5_000),
        f"files_{args.files}": lambda p: wide(p, args.files),
    }
    figures = {}
    with tempfile.TemporaryDirectory(prefix="assay-bench-removal-") as scratch:
        for name, make in shapes.items():
            ours, theirs = [], []
            for _ in range(args.runs):
                ours.append(timed(make, remove_tree, Path(scratch)))
                theirs.append(timed(make, rm, Path(scratch)))
            figures[name] = {
                "remove_tree_s": round(statistics.median(ours), 3),
                "rm_rf_s": round(statistics.median(theirs), 3),
            }
    worst = max(f["remove_tree_s"] / max(f["rm_rf_s"], 1e-6) for f in figures.values())
    if args.json:
        print(json.dumps({"figures": figures, "worst_ratio": round(worst, 2)}, indent=2))
        return
    for name, figure in figures.items():
        ours, theirs = figure["remove_tree_s"], figure["rm_rf_s"]
        print(f"{name:>14}: remove_tree {ours:.2f} s, rm -rf {theirs:.2f} s")
    verdict = "ok" if worst <= TARGET_RATIO else "over"
    print(f"worst ratio {worst:.2f} (target <= {TARGET_RATIO}): {verdict}")


if __name__ == "__main__":
    main()
