"""`assay contract init` writes validators that run where it runs: pytest only when it runs for
this repository (its own virtualenv or PATH) and it has tests, ruff only when ruff runs; the
rest commented out. Stub executables on a fake PATH stand in for the tools."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.repo import git
from typer.testing import CliRunner

from assay.cli.app import build_app
from assay.core.contract import parse_contract

WITH_PYTEST = 'case "$*" in *"import pytest"*) exit 0;; esac; exit 3'


def stub(folder: Path, name: str, body: str = "exit 0") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(f"#!/bin/sh\n{body}\n")
    (folder / name).chmod(0o755)


def _init(repo: Path, monkeypatch: pytest.MonkeyPatch, path: str, *args: str) -> dict[str, str]:
    monkeypatch.chdir(repo)
    monkeypatch.setenv("PATH", path)
    result = CliRunner().invoke(build_app(), ["contract", "init", *args])
    assert result.exit_code == 0, result.output
    contract = parse_contract((repo / "assay.yaml").read_text())
    return {v.id: v.run or "" for v in contract.validators}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_app.py").write_text("def test_app():\n    pass\n")
    git(root, "init", "-q")
    return root


def test_the_repository_virtualenv_pytest_and_ruff(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub(repo / ".venv" / "bin", "python3", WITH_PYTEST)
    stub(repo / ".venv" / "bin", "ruff")
    (repo / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    checks = _init(repo, monkeypatch, "/usr/bin:/bin")
    assert checks == {"tests": "python3 -m pytest -q", "lint": "ruff check ."}
    text = (repo / "assay.yaml").read_text()
    assert "python3 from the repository's .venv/bin" in text


def test_without_ruff_lint_is_commented_out(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "tools"
    stub(tools, "python3", WITH_PYTEST)
    checks = _init(repo, monkeypatch, f"{tools}:/usr/bin:/bin")
    assert checks == {"tests": "python3 -m pytest -q"}
    text = (repo / "assay.yaml").read_text()
    assert '  # - {id: lint, kind: command, run: "ruff check .", on_fail: warn}' in text
    assert "ruff not found" in text


def test_nothing_found_nothing_runs_and_again_with_force_finds_it(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "tools"
    stub(tools, "python3", "exit 1")  # a python3 without pytest, ahead of the system's
    assert _init(repo, monkeypatch, f"{tools}:/bin") == {}
    stub(tools, "pytest")
    stub(tools, "ruff")
    refused = CliRunner().invoke(build_app(), ["contract", "init"])
    assert refused.exit_code == 2 and "--force" in refused.output  # as before: never replaced
    found = _init(repo, monkeypatch, f"{tools}:/bin", "--force")
    assert found == {"tests": "pytest -q", "lint": "ruff check ."}
