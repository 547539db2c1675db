"""A command validator runs the repository's own tools, not assay's: its `.venv/bin` comes first
on the validator's PATH (inside the sandbox, where the repository is hidden), and the
virtualenv assay runs from is never ahead of the user's own tools. Real runs of the replay
coder in a real repository."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from support.fixed_run import run_fixed
from support.repo import Repo, make_repo

from assay.adapters.sandbox import bwrap_available
from assay.engine.local.runner import RunReport

ASSAY_BIN = Path(sys.prefix) / "bin"  # the virtualenv these tests (and so assay) run from


def stub(folder: Path, name: str, says: str) -> None:
    """An executable ``name`` in ``folder`` that prints ``says``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\necho {says}\n")
    path.chmod(0o755)


def _run(repo: Repo, sandbox: str, path: str, expected: str) -> tuple[RunReport, str]:
    """A run whose validator passes only when ``python3`` is the one that says ``expected``."""
    check = f"python3 --version > which.txt; cat which.txt; grep -qx {expected} which.txt"
    env = {**os.environ, "PATH": path}
    report = run_fixed(repo, check, land="branch", sandbox=sandbox, env=env)
    (which,) = [r for r in report.payload.validator_results if r.validator_id == "check"]
    return report, which.justification


NO_BWRAP = pytest.mark.skipif(not bwrap_available(), reason="no working bwrap here")
SANDBOXES = ["none", pytest.param("bwrap", marks=NO_BWRAP)]


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_the_repository_virtualenv_python_wins_over_assays(tmp_path: Path, sandbox: str) -> None:
    repo = make_repo(tmp_path)
    venv = repo.root / ".venv"
    stub(venv / "bin", "python3", "repo-python")  # not in git: only the user's checkout has it
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    # assay's own virtualenv first, as when the user activated it
    activated = os.pathsep.join([str(ASSAY_BIN), "/usr/local/bin", "/usr/bin", "/bin"])
    report, said = _run(repo, sandbox, activated, "repo-python")
    assert report.payload.status.value == "ready", said


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_without_one_the_users_python_wins_over_assays_virtualenv(
    tmp_path: Path, sandbox: str
) -> None:
    repo = make_repo(tmp_path)
    users = tmp_path / "tools"
    stub(users, "python3", "users-python")
    activated = os.pathsep.join([str(ASSAY_BIN), str(users), "/usr/bin", "/bin"])
    report, said = _run(repo, sandbox, activated, "users-python")
    assert report.payload.status.value == "ready", said


@NO_BWRAP
def test_node_modules_tools_are_seen_inside_the_sandbox(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    package = repo.root / "node_modules" / "linter"
    stub(package, "cli.js", "repo-python")  # .bin holds links into the package, as npm makes
    (repo.root / "node_modules" / ".bin").mkdir()
    (repo.root / "node_modules" / ".bin" / "python3").symlink_to("../linter/cli.js")
    report, said = _run(repo, "bwrap", "/usr/local/bin:/usr/bin:/bin", "repo-python")
    assert report.payload.status.value == "ready", said
