"""The demo: one real task, end to end, on the embedded defaults.

Builds a small git repository with a real bug (slugify drops digits) and a failing test, then
runs the real ``assay run`` on it with the ``replay`` coder, scripted to submit a wrong fix
first and the right one second. The output shows a blocked attempt, a recovery wave fed with
the failure, a pass, the merge (one squashed commit on main, authored by the repository's own
identity, with Assay-* trailers; the attempts' commits stay on the run's branch), the settled
task and the payload.

``replay`` stands in for the coder because no model is reachable from here; with Claude Code
installed, change ``kind: replay`` to ``kind: claude`` in the contract below (and drop
``steps``), and the same run drives the real agent.

The coder and the validator run in the bubblewrap sandbox when ``bwrap`` works here; when it
does not, the demo says so and runs with ``sandbox: none`` (unconfined), as a contract would.

The demo's repository is kept (in ``.demo/`` of this checkout, git-ignored, replaced by the next
demo) so its ledger can be looked at afterwards: the demo ends by saying how to open the
dashboard on it.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.syntax import Syntax

BIN = Path(sys.executable).parent
DEMO = Path(__file__).resolve().parent.parent / ".demo"
console = Console()

BUGGY = '''\
import re


def slugify(text: str) -> str:
    """Lower-case words joined by hyphens."""
    words = re.findall(r"[a-zA-Z]+", text)
    return "-".join(w.lower() for w in words)
'''
WRONG_FIX = BUGGY.replace('"""Lower-case words', '"""Lower-case, trimmed words').replace(
    're.findall(r"[a-zA-Z]+", text)', 're.findall(r"[a-zA-Z]+", text.strip())'
)
RIGHT_FIX = BUGGY.replace("[a-zA-Z]+", "[a-zA-Z0-9]+")
TESTS = """\
from slug import slugify


def test_words():
    assert slugify("Hello World") == "hello-world"


def test_digits():
    assert slugify("Python 3 rocks") == "python-3-rocks"
"""
CONFTEST = """\
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "src"))
"""
CONTRACT = """\
task: |
  slugify() drops digits: "Python 3 rocks" must become "python-3-rocks".
  Fix src/slug.py; tests/test_slug.py::test_digits must pass.
anchors: [src/slug.py, "src/slug.py::slugify"]
scope: {{allow: ["src/**"], protect: ["tests/**"]}}
coder:
  kind: replay          # with a model: kind: claude (and no steps)
  steps:
    - {{diff: {fixes}/wrong_slug.diff}}
    - {{diff: {fixes}/right_slug.diff}}
validators:
  - {{id: tests, kind: command, run: "python -m pytest -q -p no:cacheprovider tests"}}
policy: unanimous
budgets: {{max_attempts: 3, max_recovery: 2}}
land: merge
sandbox: {sandbox}
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=demo", "-c", "user.email=demo@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def fix_diff(before: str, after: str) -> str:
    """The unified diff of src/slug.py from ``before`` to ``after``, as ``git apply`` reads it.
    The second attempt continues from the first one's tree, so its diff starts there."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        "a/src/slug.py",
        "b/src/slug.py",
    )
    return "".join(lines)


def sandbox_mode() -> str:
    """``bwrap`` when bubblewrap can confine the run here; otherwise say so, plainly."""
    from assay.adapters.sandbox import bwrap_problem

    problem = bwrap_problem()
    if problem is None:
        console.print("[green]sandbox:[/] bubblewrap works here: the coder and the validator "
                      "run confined (sandbox: bwrap)")  # fmt: skip
        return "bwrap"
    console.print(f"[bold yellow]sandbox: NOT confined.[/] {problem}")
    console.print("This demo runs with [bold]sandbox: none[/]: coder and validator unconfined.")
    return "none"


def main() -> int:
    work = DEMO
    shutil.rmtree(work, ignore_errors=True)  # the previous demo's
    work.mkdir(parents=True)
    try:
        repo, fixes = work / "slugs", work / "fixes"
        (repo / "src").mkdir(parents=True)
        (repo / "tests").mkdir()
        fixes.mkdir()
        (repo / "src" / "slug.py").write_text(BUGGY)
        (repo / "tests" / "test_slug.py").write_text(TESTS)
        (repo / "tests" / "conftest.py").write_text(CONFTEST)
        (fixes / "wrong_slug.diff").write_text(fix_diff(BUGGY, WRONG_FIX))
        (fixes / "right_slug.diff").write_text(fix_diff(WRONG_FIX, RIGHT_FIX))
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", "slugify, with a bug")
        git(repo, "config", "user.name", "Demo Developer")  # the identity assay commits as
        git(repo, "config", "user.email", "dev@example.com")
        contract = work / "assay.yaml"  # outside the repository: its checkout stays clean
        text = CONTRACT.format(fixes=fixes, sandbox=sandbox_mode())
        contract.write_text(text)
        console.rule("[bold]A repository with a real bug")
        console.print(f"{repo}: src/slug.py, tests/test_slug.py (test_digits fails)")
        console.print(Syntax(text, "yaml"))
        console.rule("[bold]assay run --contract assay.yaml")
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        env.pop("ASSAY_HOME", None)
        env.pop("ASSAY_DATABASE_URL", None)
        # --progress always: the attempts are the point of the demo, in a log as on a terminal.
        command = [str(BIN / "assay"), "run", "--contract", str(contract), "--progress", "always"]
        done = subprocess.run(command, cwd=repo, env=env, check=False)
        console.print(f"exit code {done.returncode} (0: the task is done)")
        console.rule("[bold]main after the merge: one squashed commit, with its trailers")
        log = subprocess.run(
            ["git", "log", "--format=%h %s%nAuthor: %an <%ae>%n%(trailers:only,unfold)", "main"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        )
        console.print(log.stdout.strip(), markup=False, highlight=False, soft_wrap=True)
        console.print(Syntax((repo / "src" / "slug.py").read_text(), "python"))
        payload = next((repo / ".assay" / "runs").glob("*/payload.json"))
        console.rule(f"[bold]The payload ({payload.relative_to(repo)})")
        document = json.loads(payload.read_text())
        shown = {
            k: document[k]
            for k in (
                "status",
                "reason",
                "task_status",
                "attempt_spent",
                "attempts",
                "usage",
                "sandbox",
                "network",
            )
        }
        console.print(Syntax(json.dumps(shown, indent=2), "json"))
        console.rule("[bold]The dashboard")
        console.print(
            "The demo's repository and its ledger are kept. To see the run in the dashboard "
            "(queue, the run's timeline with both attempts, the diff), open it with:"
        )
        console.print(
            f"  cd {repo} && {BIN / 'assay'} serve --web-only", markup=False, soft_wrap=True
        )
        console.print(
            "and open the login URL it prints (`dashboard login: http://127.0.0.1:8765/login?"
            "token=…`, on the first start; Ctrl-C stops it)."
        )
        return done.returncode
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)  # a half-built demo is nothing to look at
        raise


if __name__ == "__main__":
    raise SystemExit(main())
