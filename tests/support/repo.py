"""A small real git repository with a bug and a failing test, for end-to-end runs."""

from __future__ import annotations

import atexit
import base64
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ASSAY = Path(sys.executable).with_name("assay")
BUGGY = 'def slugify(text):\n    return "-".join(w.lower() for w in text.split() if w.isalpha())\n'
FIXED = 'def slugify(text):\n    return "-".join(w.lower() for w in text.split() if w.isalnum())\n'
WRONG = 'def slugify(text):\n    return "-".join(w.upper() for w in text.split() if w.isalpha())\n'
TEST = (
    "import sys, pathlib\n"
    "sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / 'src'))\n"
    "from slug import slugify\n\n"
    "def test_digits():\n    assert slugify('Python 3 rocks') == 'python-3-rocks'\n"
)
# The repository's test as a plain script, the validator of most runs: it answers in
# milliseconds where starting pytest takes most of a second, and says what pytest would say.
CHECK = """import pathlib, sys
sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "src"))
from slug import slugify
got = slugify("Python 3 rocks")
if got != "python-3-rocks":
    sys.exit(f"FAILED tests/test_slug.py::test_digits - assert {got!r} == 'python-3-rocks'")
print("1 passed")
"""
CHECK_TESTS = f"{sys.executable} -B tests/check_digits.py"
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"


def git(repo: Path, *args: str, strip: bool = True) -> str:
    """``git *args`` in ``repo`` as a test user; its stdout (stripped unless ``strip=False``,
    which keeps a diff's final newline)."""
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip() if strip else done.stdout


@dataclass
class Repo:
    root: Path
    fixes: Path

    def assay(
        self, *args: str, timeout: float = 120, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """``assay ARGS`` as a real process (the end-to-end tier)."""
        return subprocess.run(
            [str(ASSAY), *args],
            cwd=self.root,
            capture_output=True,
            text=True,
            env=self.environment(**env),
            timeout=timeout,
            check=False,
        )

    def main(self, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
        """``assay ARGS`` in this process, as :meth:`assay` would run it (the unit tier)."""
        from support.in_process import run_assay

        return run_assay(args, cwd=self.root, env=self.environment(**env), stdin=stdin)

    def environment(self, **env: str) -> dict[str, str]:
        """This process's environment without assay's settings, plus ``env``."""
        environ = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
        environ.update(env)
        return environ

    def put(self, name: str, dest: str) -> str:
        """A shell command that writes the fixture ``name`` to ``dest`` in the seat. The content
        travels inside the command: a seat's sandbox sees neither this test's folders (its
        ``/tmp`` is private) nor the user's repository, so ``cp <fixes>/x`` cannot work there."""
        encoded = base64.b64encode((self.fixes / name).read_bytes()).decode()
        return f"echo {encoded} | base64 -d > {dest}"

    def contract(self, name: str, text: str) -> Path:
        path = self.fixes / name
        path.write_text(text)
        return path

    def payloads(self) -> list[dict[str, Any]]:
        return [
            json.loads(p.read_text())
            for p in sorted((self.root / ".assay" / "runs").glob("*/payload.json"))
        ]


@functools.cache
def _template() -> Path:
    """The repository :func:`make_repo` copies, made once per test process: a copy costs a
    few milliseconds where ``git init``, ``add`` and ``commit`` cost three processes."""
    root = Path(tempfile.mkdtemp(prefix="assay-test-repo-")) / "repo"
    (root / "src").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "src" / "slug.py").write_text(BUGGY)
    (root / "tests" / "test_slug.py").write_text(TEST)
    (root / "tests" / "check_digits.py").write_text(CHECK)
    (root / ".gitignore").write_text("__pycache__/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "slugify with a bug")
    atexit.register(shutil.rmtree, root.parent, ignore_errors=True)
    return root


def make_repo(tmp_path: Path) -> Repo:
    """A repository on ``main`` with one commit: ``src/slug.py`` with a bug, its failing test
    (``tests/test_slug.py`` and the plain script ``tests/check_digits.py``), and beside it
    ``fixes/`` with a wrong and a right fix."""
    root, fixes = tmp_path / "repo", tmp_path / "fixes"
    shutil.copytree(_template(), root, symlinks=True)
    fixes.mkdir()
    (fixes / "wrong.py").write_text(WRONG)
    (fixes / "fixed.py").write_text(FIXED)
    return Repo(root=root, fixes=fixes)


def make_repo_with_origin(tmp_path: Path) -> Repo:
    """:func:`make_repo`, with a bare repository as its ``origin`` that has ``main``."""
    made = make_repo(tmp_path)
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(made.root, "remote", "add", "origin", str(origin))
    git(made.root, "push", "-q", "origin", "main")
    return made


def replay_contract(
    repo: Repo, *steps: str, land: str = "merge", extra: str = "", validator: str = CHECK_TESTS
) -> Path:
    """A contract whose replay coder writes the fixtures ``steps`` over ``src/slug.py`` in turn,
    judged by ``validator`` (the plain-script test unless a test needs pytest itself)."""
    lines = "\n".join(f'    - {{script: "{repo.put(f"{s}.py", "src/slug.py")}"}}' for s in steps)
    return repo.contract(
        f"{land}.yaml",
        f"""task: Make slugify keep digits.
anchors: [src/slug.py, "src/slug.py::slugify"]
scope: {{allow: ["src/**"]}}
coder:
  kind: replay
  steps:
{lines}
validators:
  - {{id: tests, kind: command, run: "{validator}"}}
land: {land}
{extra}""",
    )


def dirty(path: Path) -> bool:
    """Whether the work tree at ``path`` has changes, untracked files included."""
    return git(path, "status", "--porcelain", "--untracked-files=all") != ""


def scope_breach_run(repo: Repo) -> tuple[str, str]:
    """``assay run`` (in-process) of a coder that writes outside its scope: the run halts on
    ``halt-scope-breach`` (exit 3) and the machine holds the task; (task id, run id)."""
    breach = repo.contract(
        "breach.yaml",
        """task: fix it
scope: {allow: ["src/**"]}
coder: {kind: replay, steps: [{script: "echo x > README.md"}]}
land: merge
""",
    )
    ran = repo.main("run", "--contract", str(breach), "--json")
    assert ran.returncode == 3, ran.stderr
    done = json.loads(ran.stdout)
    return done["task_id"], done["run_id"]
