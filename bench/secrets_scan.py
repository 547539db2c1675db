"""The secret check on a large change: an N-file change (default 1,500) built in a temporary git
repository, scanned by the real ``secrets`` validator. Target: under 1 s.

The repository has N files (Python modules, YAML and Markdown files, 30 lines each); the change
edits each one as a bulk edit would (one line changed, two added: a new import or key, a
comment, some mentioning passwords, tokens and URLs, none a credential). The change is read by
assay's own ``read_changes`` (not timed); the validator's ``validate`` is timed: the first call
in the process (it imports detect-secrets) and the median of the next ``runs``.

``secrets_scan(files, runs)`` is what ``bench/real_repo.py`` calls.

Usage: ``.venv/bin/python bench/secrets_scan.py [--files 1500] [--runs 5] [--json]``.
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
sys.path.insert(0, str(ROOT / "src"))

from assay.adapters import git  # noqa: E402
from assay.adapters.validators.base import ValidationContext  # noqa: E402
from assay.adapters.validators.secrets import SecretsValidator  # noqa: E402

TARGET_SECONDS = 1.0
_EXTS = (".py", ".py", ".py", ".yml", ".md")


def _file(n: int, ext: str) -> str:
    if ext == ".py":
        head = f'"""Module {n}: helpers."""\n\nimport os\n\nTIMEOUT = {n % 60}\n'
        body = "".join(f"def helper_{n}_{i}(value):\n    return value + {i}\n" for i in range(12))
        return head + body + "\n"
    if ext == ".yml":
        return f"name: job-{n}\nsteps:\n" + "".join(
            f"  - run: make step{i}\n    timeout: {i}\n" for i in range(14)
        )
    notes = "".join(f"Line {i} of the notes about part {n}.\n" for i in range(28))
    return f"# Notes {n}\n\n{notes}"


def _edit(n: int, ext: str, text: str) -> str:
    lines = text.splitlines(keepends=True)
    if ext == ".py":
        lines[0] = f'"""Module {n}: helpers (see docs/module-{n}.md)."""\n'
        new = [
            "import logging\n",
            f'LOG = logging.getLogger("pkg.mod{n}")  # password handling lives in auth.py\n'
            if n % 10 == 0
            else f'API_URL = "https://api.example.com/v2/items/{n}"\n',
        ]
    elif ext == ".yml":
        lines[0] = f"name: job-{n}-renamed\n"
        new = ["  - run: make lint\n", f"    env: {{TOKEN_NAME: deploy-{n}}}\n"]
    else:
        lines[0] = f"# Notes {n}, revised\n"
        new = ["\n", f"See https://docs.example.com/part/{n} for the secret rotation policy.\n"]
    return "".join([*lines[:5], *new, *lines[5:]])


def changed_repo(root: Path, files: int) -> tuple[Path, str]:
    """A repository of ``files`` files, one commit, and every file edited in the work tree."""
    repo = root / "repo"
    paths = []
    for n in range(files):
        ext = _EXTS[n % len(_EXTS)]
        path = repo / f"pkg{n // 100:03d}" / f"mod{n:05d}{ext}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_file(n, ext))
        paths.append((n, ext, path))
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "b"],
        check=True,
    )
    base = git.head_commit(repo)
    for n, ext, path in paths:
        path.write_text(_edit(n, ext, path.read_text()))
    return repo, base


def secrets_scan(files: int = 1500, runs: int = 5) -> list[dict[str, object]]:
    """The scan's cold (first, with detect-secrets' import) and warm (median) times, as dicts
    (name, median_ms, runs, note)."""
    with tempfile.TemporaryDirectory(prefix="assay-bench-secrets-") as tmp:
        repo, base = changed_repo(Path(tmp), files)
        change = git.read_changes(repo, base)
        added = sum(f.added_lines for f in change.files)
        context = ValidationContext(
            worktree=repo,
            change=change,
            task="bench",
            env={},
            settings={"id": "secrets"},
            log_dir=Path(tmp) / "logs",
        )
        walls = []
        for _ in range(runs + 1):
            start = time.perf_counter()
            outcome = SecretsValidator().validate(context)
            walls.append(time.perf_counter() - start)
        if outcome.result.error or outcome.result.findings:
            raise SystemExit(f"the benign change was not clean: {outcome.result}")
    cold, warm = walls[0], statistics.median(walls[1:])
    what = f"{len(change.files)}-file change, {added} added lines"
    verdict = "ok" if cold < TARGET_SECONDS else "OVER"
    return [
        {
            "name": f"secret scan, first in the process ({what})",
            "median_ms": cold * 1000,
            "runs": 1,
            "note": f"; target < {TARGET_SECONDS:.0f} s: {verdict}",
        },
        {"name": f"secret scan ({what})", "median_ms": warm * 1000, "runs": runs, "note": ""},
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=1500)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = secrets_scan(args.files, args.runs)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for figure in figures:
        print(
            f"{figure['name']}: {figure['median_ms']:.0f} ms "
            f"(median of {figure['runs']}){figure['note']}"
        )


if __name__ == "__main__":
    main()
