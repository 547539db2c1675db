"""The secret check on a large change: an N-file change (default 1,500) built in a temporary git
repository, scanned by the real ``secrets`` validator. Target: under 1 s.

The repository has N files (Python modules, YAML and Markdown files, 30 lines each); the change
edits each one as a bulk edit would (one line changed, two added: a new import or key, a
comment, some mentioning passwords, tokens and URLs, none a credential). The change is read by
assay's own ``read_changes`` (not timed); the validator's ``validate`` is timed: the first call
in the process (it imports detect-secrets) and the median of the next ``runs``.

``secrets_scan(files, runs)`` is what ``bench/real_repo.py`` calls.

``--huge N``: one added file of N lines instead (default 3,000,000 lines, about 130 MB of
source-like text), its diff streamed to the validator from a file as git would stream it
(``ValidationContext.diff_lines``); ``--from-string`` hands it over whole as ``change.diff``
instead. Measured in a child process of its own: the wall time of ``validate`` and the
process's peak RSS (with the interpreter and detect-secrets loaded before the clock starts).
Target: under a minute, and a peak RSS that does not grow with the file (streamed: tens of MB
over the interpreter's own; the code before streaming: 143 s and 1,978 MB).

Usage: ``.venv/bin/python bench/secrets_scan.py [--files 1500] [--runs 5] [--json]``
or ``.venv/bin/python bench/secrets_scan.py --huge 3000000 [--from-string] [--json]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
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


HUGE_TARGET_SECONDS = 60.0


def _huge_line(n: int) -> str:
    """One line of a large generated source file (about 43 characters on average, as the
    130 MB, 3-million-line file of the issue)."""
    kind = n % 8
    if kind == 0:
        return f"def step_{n}(record, retries={n % 7}, timeout=30):"
    if kind == 1:
        return f'    name = "record-{n}-of-the-batch-import"'
    if kind == 2:
        return f"    total = compute_total(record, item_{n % 97})"
    if kind == 3:
        return f"    # step {n}: read the next record, then check it"
    if kind == 4:
        return f'    log.info("token refresh for %s", name)  # {n}'
    if kind == 5:
        return f"    return total + {n}"
    if kind == 6:
        return ""
    return f"    url = 'https://api.example.com:8443/v2/items/{n}'"


def write_huge_diff(path: Path, lines: int) -> int:
    """The diff git prints for one added file of ``lines`` lines; its size in bytes."""
    with path.open("w", encoding="utf-8") as out:
        out.write("diff --git a/big.py b/big.py\nnew file mode 100644\n")
        out.write(f"index 0000000..1234567\n--- /dev/null\n+++ b/big.py\n@@ -0,0 +1,{lines} @@\n")
        for n in range(1, lines + 1):
            out.write(f"+{_huge_line(n)}\n")
    return path.stat().st_size


def huge_child(diff: Path, from_string: bool) -> dict[str, object]:
    """In this process: the scan of ``diff``'s one huge file (detect-secrets warmed first)."""
    from assay.core.changes import ChangeSet

    warm = ValidationContext(
        worktree=diff.parent,
        change=ChangeSet(base_commit="0" * 40, diff=""),
        task="bench",
        env={},
        settings={"id": "secrets"},
        log_dir=diff.parent / "logs",
    )
    SecretsValidator().validate(warm)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if from_string:
        change = ChangeSet(base_commit="0" * 40, diff=diff.read_text(encoding="utf-8"))
        context = dataclasses.replace(warm, change=change)
    else:

        def streamed() -> Iterator[str]:
            with diff.open(encoding="utf-8", errors="replace") as lines:
                yield from lines

        context = dataclasses.replace(warm, diff_lines=streamed)
    outcome = SecretsValidator().validate(context)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "seconds": seconds,
        "peak_rss_mb": peak / 1024,
        "rss_before_mb": before / 1024,
        "verdict": f"{outcome.result.severity.value}: {outcome.result.justification[:160]}",
    }


def huge_scan(lines: int, from_string: bool) -> list[dict[str, object]]:
    """The scan of one added file of ``lines`` lines, in a child process of its own."""
    with tempfile.TemporaryDirectory(prefix="assay-bench-secrets-huge-") as tmp:
        diff = Path(tmp) / "big.diff"
        size = write_huge_diff(diff, lines)
        child = [sys.executable, __file__, "--huge-child", str(diff)]
        done = subprocess.run(
            child + (["--from-string"] if from_string else []),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"the huge scan failed: {done.stderr[-3000:]}")
        got = json.loads(done.stdout)
    how = "whole, as change.diff" if from_string else "streamed, as diff_lines"
    verdict = "ok" if float(got["seconds"]) < HUGE_TARGET_SECONDS else "OVER"
    return [
        {
            "name": f"secret scan of one added file of {lines} lines ({size / 1e6:.0f} MB, {how})",
            "median_ms": float(got["seconds"]) * 1000,
            "runs": 1,
            "note": (
                f"; peak RSS {float(got['peak_rss_mb']):.0f} MB "
                f"({float(got['rss_before_mb']):.0f} MB before the scan); "
                f"target < {HUGE_TARGET_SECONDS:.0f} s: {verdict}; {got['verdict']}"
            ),
        }
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=1500)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--huge", type=int, nargs="?", const=3_000_000, default=None)
    parser.add_argument("--from-string", action="store_true")
    parser.add_argument("--huge-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if args.huge_child is not None:
        print(json.dumps(huge_child(args.huge_child, args.from_string)))
        return
    if args.huge is not None:
        figures = huge_scan(args.huge, args.from_string)
    else:
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
