"""Real commits replayed through ``assay run``, beside the git floor for the same change.

Each of the last ``--commits`` small non-merge commits of a repository (this checkout's own
history by default) is replayed on its parent, twice:

- the git floor: what any tool that works in a copy must do at least: ``git worktree add`` at
  the parent, ``git apply`` of the commit's patch, ``git add -A`` and ``git commit``, ``git
  worktree remove``;
- assay: ``assay run`` with a ``command`` coder that applies the same patch in its seat, one
  validator (``true``) and ``land: merge`` (the squashed commit lands on ``main``).

Reported: each commit's pair of wall times, the median ratio (target: <= 2x) and the median
fixed cost (assay minus floor). The runs of a commit are interleaved so the machine's drift
falls on both alike.

Usage: ``.venv/bin/python bench/replay.py [--repo PATH] [--commits 15] [--max-files 20]
[--json]``
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

from _timing import child_env  # noqa: E402

TARGET_RATIO = 2.0
ASSAY = ROOT / ".venv" / "bin" / "assay"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {done.stderr[-500:]}")
    return done.stdout


def small_commits(repo: Path, count: int, max_files: int) -> list[str]:
    """The newest ``count`` non-merge commits touching 1..``max_files`` text files."""
    chosen: list[str] = []
    for commit in git(repo, "rev-list", "--no-merges", "--max-count=400", "HEAD").split():
        stat = git(repo, "diff", "--numstat", f"{commit}^", commit).splitlines()
        if not 0 < len(stat) <= max_files or any(line.startswith("-") for line in stat):
            continue  # empty, too wide, or binary
        chosen.append(commit)
        if len(chosen) == count:
            break
    return chosen


def floor(work: Path, parent: str, patch: Path, n: int) -> float:
    copy = work.parent / f"floor-{n}"
    start = time.perf_counter()
    git(work, "worktree", "add", "-q", "--detach", str(copy), parent)
    git(copy, "apply", str(patch))
    git(copy, "add", "-A")
    git(copy, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "replay")
    git(work, "worktree", "remove", "--force", str(copy))
    return time.perf_counter() - start


def assay_run(work: Path, contract: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [str(ASSAY), "run", "--contract", str(contract), "--json"],
        cwd=work,
        check=False,
        capture_output=True,
        text=True,
        env=child_env(),
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"assay run failed ({done.returncode}): {done.stderr[-1500:]}")
    return wall


def contract_for(folder: Path, patch: Path) -> Path:
    path = folder / f"{patch.stem}.yaml"
    path.write_text(
        f"""task: Replay {patch.stem}.
coder: {{kind: command, command: "git apply {patch}"}}
validators: [{{id: ok, kind: command, run: "true"}}]
env: {{PATCHES: {patch.parent}}}
budgets: {{max_recovery: 0}}
land: merge
"""
    )
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=ROOT)
    parser.add_argument("--commits", type=int, default=15)
    parser.add_argument("--max-files", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    commits = small_commits(options.repo, options.commits, options.max_files)
    # Not under /tmp: the coder's sandbox has a private /tmp of its own.
    (ROOT / ".cache").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / ".cache", prefix="replay-") as scratch:
        top = Path(scratch)
        work = top / "work"
        subprocess.run(["git", "clone", "-q", str(options.repo), str(work)], check=True)
        patches = top / "patches"
        patches.mkdir()
        rows = []
        for n, commit in enumerate(commits):
            parent = git(work, "rev-parse", f"{commit}^").strip()
            patch = patches / f"{commit[:12]}.patch"
            patch.write_text(git(work, "diff", "--binary", parent, commit))
            contract = contract_for(top, patch)
            git(work, "checkout", "-q", "-B", "main", parent)
            git(work, "clean", "-fdq")
            git_s = floor(work, parent, patch, n)
            assay_s = assay_run(work, contract)
            rows.append({"commit": commit[:12], "git_s": git_s, "assay_s": assay_s})
            if not options.json:
                print(
                    f"{commit[:12]}  git {git_s * 1000:7.0f} ms  assay {assay_s * 1000:7.0f} ms"
                    f"  {assay_s / git_s:5.1f}x",
                    flush=True,
                )
    ratios = [r["assay_s"] / r["git_s"] for r in rows]
    summary = {
        "commits": len(rows),
        "git_floor_median_s": round(statistics.median(r["git_s"] for r in rows), 3),
        "assay_median_s": round(statistics.median(r["assay_s"] for r in rows), 3),
        "fixed_cost_median_s": round(statistics.median(r["assay_s"] - r["git_s"] for r in rows), 3),
        "ratio_median": round(statistics.median(ratios), 2),
        "target_ratio": TARGET_RATIO,
    }
    print(json.dumps({**summary, "rows": rows} if options.json else summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
