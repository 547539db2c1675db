"""What ``assay contract init`` finds for the template's validators, where it runs.

Each tool is looked up as a command validator would find it at run time (the validator's PATH:
:mod:`assay.adapters.repo_tools`) and run once, briefly: a name on PATH is not enough (a pyenv
shim is there for every version's tools, and fails for a version without the tool).

- pytest: ``python3 -c "import pytest"`` succeeds, then the template runs ``python3 -m
  pytest`` (that Python with its packages, the repository's top folder on ``sys.path`` so its
  own modules import); else ``pytest --version`` succeeds, then ``pytest``.
- ruff: ``ruff --version`` succeeds.
- test files: git lists a ``test_*.py`` or ``*_test.py`` (tracked, or untracked and not
  ignored): pytest with nothing to collect exits 5, which would block every run.
"""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from assay.adapters import git
from assay.adapters.envpolicy import child_environment
from assay.adapters.repo_tools import REPO_TOOL_FOLDERS, with_repo_tools
from assay.core.contract_template import TEST_FILE_PATTERNS, FoundTool, ToolFacts

PROBE_TIMEOUT = 15.0  # seconds one probe may take (a cold Python importing pytest: well under)


def find_tools(repo: Path, operator_env: Mapping[str, str]) -> ToolFacts:
    """pytest, ruff and test files for ``repo``, found with the environment a command
    validator would get from ``operator_env``."""
    env = with_repo_tools(child_environment(operator_env), repo)
    return ToolFacts(
        pytest=_pytest(repo, env),
        test_files=has_test_files(repo),
        ruff=_tool(repo, env, "ruff", ["--version"]),
    )


def _pytest(repo: Path, env: Mapping[str, str]) -> FoundTool | None:
    python = shutil.which("python3", path=env["PATH"])
    if python is not None and _runs([python, "-c", "import pytest"], repo, env):
        return FoundTool("python3 -m pytest", _folder(python, repo))
    return _tool(repo, env, "pytest", ["--version"])


def _tool(repo: Path, env: Mapping[str, str], name: str, args: Sequence[str]) -> FoundTool | None:
    found = shutil.which(name, path=env["PATH"])
    if found is None or not _runs([found, *args], repo, env):
        return None
    return FoundTool(name, _folder(found, repo))


def _folder(program: str, repo: Path) -> str:
    """The repository folder ``program`` was found in (``.venv/bin``), or "" (the PATH)."""
    where = Path(program).parent
    for name in REPO_TOOL_FOLDERS:
        try:
            if (repo / name).resolve() == where.resolve():
                return name
        except OSError:
            continue
    return ""


def _runs(argv: list[str], cwd: Path, env: Mapping[str, str]) -> bool:
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=PROBE_TIMEOUT,
            check=False,
            start_new_session=True,  # a Ctrl-C reaches assay, never a probe half-way
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def has_test_files(repo: Path) -> bool:
    """Whether git lists a Python test file in ``repo`` (none outside a git repository)."""
    try:
        names = git.listed_files(repo)
    except git.GitError:
        return False
    return any(
        fnmatch.fnmatchcase(name.rsplit("/", 1)[-1], pattern)
        for name in names
        for pattern in TEST_FILE_PATTERNS
    )
