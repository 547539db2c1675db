"""Reading a candidate back: today's host-side git in the seat against the capture inside the
sandbox, on a generated repository of 5,000 files. Target: the new path at most 1.5x today's.

* today (the path before the capture, whose code is gone): ``create_seat`` and the git commands
  the host then ran in the seat to read the candidate back (:data:`HOST_READ_BACK`: stage, three
  diffs, the checkpoint commit, the candidate commit), run as plain git here;
* new: the collector in bwrap (the seat and the object stores readable, only its folder
  writable, no network) + ``CandidateStore.import_pack`` + one ``checkout`` (what each command
  validator gets). The seat is made untimed: the new path makes it too, but the figure asked for
  is the capture against today's set-up; ``new + seat`` adds it for the whole picture.

Each seat holds the same small edit (3 files changed, 2 new). Each figure is the median wall
time of N runs, the kinds taking turns so the machine's drift falls on all of them alike.

Usage: ``.venv/bin/python bench/capture.py [--runs 10] [--files 5000] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from seat_setup import generated_repo  # noqa: E402

from assay.adapters import git, seats  # noqa: E402
from assay.adapters.candidates import CandidateStore  # noqa: E402
from assay.adapters.capture import capture_seat  # noqa: E402
from assay.adapters.sandbox_spec import SandboxSpec  # noqa: E402
from assay.core.vocab import NetworkMode, SandboxMode  # noqa: E402

TARGET_RATIO = 1.5
MiB = 1024 * 1024
# What the host ran in a seat before the capture (read_changes, commit_all, candidate_commit).
HOST_READ_BACK = (
    ("add", "-A"),
    ("diff", "--cached", "-M", "--no-ext-diff", "--no-textconv", "--raw", "-z", "{base}", "--"),
    ("diff", "--cached", "-M", "--no-ext-diff", "--no-textconv", "--numstat", "-z", "{base}"),
    ("diff", "--cached", "-M", "--no-ext-diff", "--no-textconv", "{base}", "--"),
    ("add", "-A"),
    ("diff", "--cached", "--quiet"),
    ("commit", "--quiet", "--no-verify", "-m", "assay: attempt 1, seat 1"),
    ("rev-parse", "HEAD"),
    ("write-tree",),
)


def edit(seat: Path, files: int) -> None:
    for n in sorted({0, files // 2, files - 1}):
        path = seat / f"pkg{n // 100:03d}" / f"mod{n:05d}.py"
        path.write_text(path.read_text() + f"EXTRA = {n}\n")
    (seat / "pkg000" / "new_a.py").write_text("NEW = 1\n")
    (seat / "newpkg").mkdir()
    (seat / "newpkg" / "new_b.py").write_text("NEW = 2\n")


class Bench:
    def __init__(self, root: Path, files: int) -> None:
        self.root = root
        self.files = files
        self.repo = generated_repo(root, files)
        self.base = git.head_commit(self.repo)
        self.stores = seats.object_stores(self.repo)
        self.assay_dir = self.repo / ".assay"
        self.store = CandidateStore(seats.seats_root(self.assay_dir, "r1") / "c.git", self.stores)
        self.env = {"PATH": os.environ.get("PATH", os.defpath)}

    def seat(self, name: str) -> seats.Seat:
        path = seats.seat_path(self.assay_dir, "r1", name)
        return seats.create_seat(self.repo, path, self.base, git.seat_branch("r1", name))

    def today(self, n: int) -> float:
        start = time.perf_counter()
        seat = self.seat(f"today-{n}")
        made = time.perf_counter() - start
        edit(seat.path, self.files)
        start = time.perf_counter()
        tree = ""
        for args in HOST_READ_BACK:
            done = git._run(seat.path, *(a.format(base=self.base) for a in args), ok=(0, 1))
            tree = git._text(done.stdout).strip()
        git._out(seat.path, "commit-tree", tree, "-p", self.base, "-m", "assay: candidate")
        return made + time.perf_counter() - start

    def new(self, n: int) -> tuple[float, float]:
        """(capture + import + checkout, the seat's set-up)."""
        start = time.perf_counter()
        seat = self.seat(f"new-{n}")
        made = time.perf_counter() - start
        edit(seat.path, self.files)
        out = self.root / "captures" / f"c{n}"
        home = self.root / "captures" / f"c{n}.home"
        stores = (*self.stores, self.store.objects)
        spec = SandboxSpec(
            mode=SandboxMode.BWRAP,
            network=NetworkMode.NONE,
            writable=(out,),
            readable=(seat.path, *stores),
            hidden=(self.repo,),
            home=home,
        )
        start = time.perf_counter()
        captured = capture_seat(
            worktree=seat.path,
            base_commit=self.base,
            stores=stores,
            out_dir=out,
            sandbox=spec,
            env=self.env,
        )
        if not captured.ok:
            raise SystemExit(f"the capture failed: {captured.error or captured.over_budget}")
        tree = self.store.import_pack(captured, max_objects=100_000, max_bytes=200 * MiB)
        commit = self.store.commit(tree, self.base, "assay: candidate")
        seats.create_seat(  # the fresh checkout one command validator gets
            self.repo,
            self.root / "checkouts" / f"v{n}",
            commit,
            "check",
            store=self.stores[0],
            borrows=(self.store.objects,),
        )
        return time.perf_counter() - start, made

    def clean(self) -> None:
        for folder in (seats.seats_root(self.assay_dir, "r1"), self.root / "checkouts"):
            for entry in folder.glob("*"):
                if entry.name != "c.git":
                    shutil.rmtree(entry, ignore_errors=True)
        shutil.rmtree(self.root / "captures", ignore_errors=True)
        os.sync()  # the removal's write-back is not charged to the next run


def capture_figures(runs: int, files: int = 5000) -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory(prefix="assay-bench-capture-") as tmp:
        bench = Bench(Path(tmp), files)
        bench.today(-1)  # warm the caches once, untimed
        bench.new(-1)
        bench.clean()
        today: list[float] = []
        new: list[float] = []
        whole: list[float] = []
        for n in range(runs):
            today.append(bench.today(n))
            captured, made = bench.new(n)
            new.append(captured)
            whole.append(captured + made)
            bench.clean()
    old_ms, new_ms, whole_ms = (statistics.median(s) * 1000 for s in (today, new, whole))
    ratio = new_ms / old_ms
    verdict = "ok" if ratio <= TARGET_RATIO else "OVER"
    note = f"; {ratio:.2f}x today's, target <= {TARGET_RATIO}x: {verdict}"
    return [
        {"name": f"today: seat + read back + commits ({files} files)", "median_ms": old_ms},
        {
            "name": f"new: capture in bwrap + import + checkout ({files} files)",
            "median_ms": new_ms,
            "note": note,
        },
        {
            "name": f"new + the seat's set-up ({files} files)",
            "median_ms": whole_ms,
            "note": f"; {whole_ms / old_ms:.2f}x today's",
        },
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = capture_figures(args.runs, args.files)
    if args.json:
        print(json.dumps([{**f, "runs": args.runs} for f in figures], indent=2))
        return
    for figure in figures:
        print(
            f"{figure['name']}: {figure['median_ms']:.1f} ms "
            f"(median of {args.runs}){figure.get('note', '')}"
        )


if __name__ == "__main__":
    main()
