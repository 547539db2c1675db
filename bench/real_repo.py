"""assay on a repository of real size: a generated one of 5,000 files (folders of 100).

1. An instant run's overhead over the git floor: the median wall time of ``assay run`` (a
   ``command`` coder that edits one file, ``true`` as the only validator, ``land: none``)
   minus the median of what any tool that works in a copy must do at least: ``git worktree
   add``, the edit, ``git diff``, ``git worktree remove``. Target: < 1.5 s.
2. The secret scan of a 1,500-file change (three lines added to each of 1,500 files in a real
   worktree, read back as assay reads a candidate, then the ``secrets`` validator on it).
   Target: < 1 s.
3. ``.assay``'s size (``du -sb``) after 20 blocked runs (the same coder, a validator that
   fails), beside the working copy one of them would have kept before, and what the kept
   branches added to ``.git``. Target: < 5 MB. Then ``assay gc --older-than 0``: what it
   removes and how long it takes.

Usage: ``.venv/bin/python bench/real_repo.py [--files 5000] [--runs 5] [--blocked 20]
[--changed 1500] [--json] [--instant-only]``; ``--instant-only`` measures part 1 alone (with
the ratio of the run to the git floor), for iterating on a run's cost.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from _timing import time_assay  # noqa: E402
from seat_setup import generated_repo  # noqa: E402
from support.repo import Repo  # noqa: E402

from assay.adapters import git  # noqa: E402

EDITED = "pkg000/mod00000.py"
TARGET_OVERHEAD_S = 1.5
TARGET_SCAN_S = 1.0
TARGET_ASSAY_BYTES = 5_000_000


def contract(repo: Repo, name: str, validator: str, land: str) -> Path:
    return repo.contract(
        f"{name}.yaml",
        f"""task: Add a line to one module.
coder: {{kind: command, command: "echo 'EXTRA = 1' >> {EDITED}"}}
validators: [{{id: check, kind: command, run: {json.dumps(validator)}}}]
budgets: {{max_recovery: 0}}
land: {land}
""",
    )


def du(path: Path) -> int:
    """``du -sb``: apparent bytes of everything under ``path``, folders included."""
    if not path.exists():
        return 0
    done = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[0])


def git_floor(repo: Path, runs: int) -> list[float]:
    """Worktree add, the one edit, diff, worktree remove: the least a copy costs."""
    walls = []
    for n in range(runs + 1):
        copy = repo.parent / f"floor-{n}"
        start = time.perf_counter()
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(copy)], check=True
        )
        with (copy / EDITED).open("a") as handle:
            handle.write("EXTRA = 1\n")
        subprocess.run(["git", "-C", str(copy), "diff", "HEAD"], capture_output=True, check=True)
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "remove", "--force", str(copy)], check=True
        )
        if n:  # the first warms the caches
            walls.append(time.perf_counter() - start)
    return walls


def instant_runs(repo: Repo, runs: int) -> list[float]:
    path = contract(repo, "instant", "true", "none")
    time_assay(repo, "run", "--contract", str(path), runs=1)  # warm
    return time_assay(repo, "run", "--contract", str(path), runs=runs)


def secret_scan(repo: Path, changed: int) -> tuple[float, int, str]:
    """(seconds of the secrets validator on a ``changed``-file change, files, its verdict)."""
    from assay.adapters.validators import get_validator
    from assay.adapters.validators.base import ValidationContext

    copy = repo.parent / "scan"
    subprocess.run(
        ["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(copy)], check=True
    )
    try:
        base = git.head_commit(copy)
        modules = sorted(copy.glob("pkg*/mod*.py"))[:changed]
        for n, module in enumerate(modules):
            with module.open("a") as handle:
                handle.write(
                    f"\n\ndef handler_{n}(request):\n"
                    f"    return {{'status': 'ok', 'module': {n}, 'retries': 3}}\n"
                )
        change = git.read_changes(copy, base)
        fields = {f.name for f in dataclasses.fields(ValidationContext)}
        extra = {k: v for k, v in (("base_commit", base), ("repo_root", repo)) if k in fields}
        context = ValidationContext(
            worktree=copy,
            change=change,
            task="bench",
            env={},
            settings={"id": "secrets", "kind": "secrets"},
            log_dir=repo.parent / "scan-logs",
            **extra,  # type: ignore[arg-type]
        )
        validator = get_validator("secrets")
        start = time.perf_counter()
        outcome = validator.validate(context)
        seconds = time.perf_counter() - start
        return seconds, len(change.paths), outcome.result.severity.value
    finally:
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "remove", "--force", str(copy)], check=True
        )


def blocked_runs(repo: Repo, count: int) -> dict[str, float]:
    home = repo.root / ".assay"
    git_before = du(repo.root / ".git")
    assay_before = du(home)
    path = contract(repo, "blocked", "false", "merge")
    walls = []
    for _ in range(count):
        start = time.perf_counter()
        done = repo.assay("run", "--contract", str(path), timeout=600)
        walls.append(time.perf_counter() - start)
        if done.returncode not in (1, 3):
            raise SystemExit(f"a blocked run exited {done.returncode}: {done.stderr[-2000:]}")
    branches = git.branches(repo.root, "refs/heads/assay/")
    figures: dict[str, float] = {
        "blocked_runs": count,
        "blocked_run_median_s": round(statistics.median(walls), 3),
        "assay_bytes_before": assay_before,
        "assay_bytes": du(home),
        "assay_seats_bytes": du(home / "seats"),
        "working_copy_bytes": du(repo.root) - du(home) - du(repo.root / ".git"),
        "kept_branches": len(branches),
        "git_growth_bytes": du(repo.root / ".git") - git_before,
    }
    start = time.perf_counter()
    collected = repo.assay("gc", "--older-than", "0", "--json")
    figures["gc_s"] = round(time.perf_counter() - start, 3)
    if collected.returncode != 0:
        raise SystemExit(f"assay gc failed ({collected.returncode}): {collected.stderr}")
    report = json.loads(collected.stdout)
    mine = [r for r in report["removed"] if r["kind"] != "relay"]  # /tmp is shared
    figures["gc_removed"] = len(mine)
    figures["assay_bytes_after_gc"] = du(home)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--blocked", type=int, default=20)
    parser.add_argument("--changed", type=int, default=1500)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--instant-only", action="store_true", help="part 1 only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="assay-bench-real-") as tmp:
        root = generated_repo(Path(tmp), args.files)
        repo = Repo(root=root, fixes=Path(tmp) / "fixes")
        repo.fixes.mkdir()
        floor = statistics.median(git_floor(root, args.runs))
        run = statistics.median(instant_runs(repo, args.runs))
        if args.instant_only:
            instant = {
                "files": args.files,
                "runs": args.runs,
                "instant_run_median_s": round(run, 3),
                "git_floor_median_s": round(floor, 3),
                "ratio": round(run / floor, 2),
            }
            print(json.dumps(instant) if args.json else instant)
            return
        scan, scanned, verdict = secret_scan(root, args.changed)
        blocked = blocked_runs(repo, args.blocked)
    figures = {
        "files": args.files,
        "runs": args.runs,
        "instant_run_median_s": round(run, 3),
        "git_floor_median_s": round(floor, 3),
        "overhead_s": round(run - floor, 3),
        "overhead_target_s": TARGET_OVERHEAD_S,
        "scan_files": scanned,
        "scan_s": round(scan, 3),
        "scan_verdict": verdict,
        "scan_target_s": TARGET_SCAN_S,
        **blocked,
        "assay_target_bytes": TARGET_ASSAY_BYTES,
    }
    if args.json:
        print(json.dumps(figures))
        return
    mb = 1e6
    print(f"repository: {args.files} files")
    print(
        f"instant run, median of {args.runs}: {run:.3f} s; git floor {floor:.3f} s; "
        f"overhead {run - floor:.3f} s (target < {TARGET_OVERHEAD_S} s)"
    )
    print(
        f"secret scan of a {scanned}-file change: {scan:.3f} s, {verdict} "
        f"(target < {TARGET_SCAN_S} s)"
    )
    print(
        f".assay after {blocked['blocked_runs']} blocked runs: "
        f"{blocked['assay_bytes'] / mb:.2f} MB (target < {TARGET_ASSAY_BYTES / mb:.0f} MB; "
        f"seats {blocked['assay_seats_bytes'] / mb:.2f} MB; one working copy "
        f"{blocked['working_copy_bytes'] / mb:.2f} MB)"
    )
    print(
        f"  kept branches {blocked['kept_branches']}, .git grew "
        f"{blocked['git_growth_bytes'] / mb:.2f} MB; blocked run median "
        f"{blocked['blocked_run_median_s']} s"
    )
    print(
        f"assay gc --older-than 0: {blocked['gc_removed']} removed in {blocked['gc_s']} s; "
        f".assay then {blocked['assay_bytes_after_gc'] / mb:.2f} MB"
    )


if __name__ == "__main__":
    main()
