"""What `assay contract init` finds for its validators: pytest and ruff as a command validator
would find them (the repository's own tool folders, then PATH), each run once; stub
executables in fake PATH folders stand in for the tools."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from assay.adapters.tool_detect import find_tools, has_test_files
from assay.core.contract_template import FoundTool, ToolFacts

BASE = "/usr/bin:/bin"  # sh, git; no python3 with pytest is assumed there: every test sets one


def stub(folder: Path, name: str, body: str = "exit 0") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


# A python3 that has pytest (`-c "import pytest"` exits 0), and one that has not.
WITH_PYTEST = 'case "$*" in *"import pytest"*) exit 0;; esac; exit 3'
WITHOUT_PYTEST = 'case "$*" in *"import pytest"*) exit 1;; esac; exit 0'
# A pyenv shim of a tool the selected version does not have.
SHIM = 'echo "pyenv: $(basename "$0"): command not found" >&2; exit 127'


def git_repo(root: Path, *files: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("def test_x():\n    pass\n")
    return root


def env(*folders: Path) -> dict[str, str]:
    path = os.pathsep.join([*map(str, folders), BASE])
    return {"PATH": path, "HOME": "/nonexistent"}


def test_pytest_through_python3_and_ruff_on_the_path(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", "tests/test_a.py")
    tools = tmp_path / "tools"
    stub(tools, "python3", WITH_PYTEST)
    stub(tools, "ruff")
    assert find_tools(repo, env(tools)) == ToolFacts(
        pytest=FoundTool("python3 -m pytest"), test_files=True, ruff=FoundTool("ruff")
    )


def test_nothing_found_is_none(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    tools = tmp_path / "tools"
    stub(tools, "python3", WITHOUT_PYTEST)
    assert find_tools(repo, env(tools)) == ToolFacts()


def test_the_pytest_script_when_python3_has_no_pytest(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", "pkg/thing_test.py")
    tools = tmp_path / "tools"
    stub(tools, "python3", WITHOUT_PYTEST)
    stub(tools, "pytest")  # pipx's, say
    found = find_tools(repo, env(tools))
    assert found.pytest == FoundTool("pytest") and found.test_files and found.ruff is None


def test_a_shim_without_its_tool_is_not_found(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", "test_a.py")
    shims = tmp_path / "pyenv" / "shims"
    stub(shims, "python3", WITHOUT_PYTEST)
    stub(shims, "pytest", SHIM)
    stub(shims, "ruff", SHIM)
    assert find_tools(repo, env(shims)) == ToolFacts(test_files=True)


def test_the_repository_virtualenv_comes_first(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", "test_a.py")
    stub(repo / ".venv" / "bin", "python3", WITH_PYTEST)
    stub(repo / ".venv" / "bin", "ruff")
    (repo / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    tools = tmp_path / "tools"
    stub(tools, "python3", WITHOUT_PYTEST)  # the PATH's python3 has none: the venv's is used
    assert find_tools(repo, env(tools)) == ToolFacts(
        pytest=FoundTool("python3 -m pytest", ".venv/bin"),
        test_files=True,
        ruff=FoundTool("ruff", ".venv/bin"),
    )


def test_assays_own_virtualenv_is_not_the_projects_python(tmp_path: Path) -> None:
    # The user activated the virtualenv assay runs from: its python3 (which has pytest, as
    # this test run's has) comes last; the user's own python3, without pytest, is asked.
    from assay.adapters.assay_exe import assay_venv_bins

    (own,) = assay_venv_bins()
    repo = git_repo(tmp_path / "repo", "test_a.py")
    tools = tmp_path / "tools"
    stub(tools, "python3", WITHOUT_PYTEST)
    found = find_tools(repo, env(own, tools))
    assert found.pytest is None or found.pytest.command != "python3 -m pytest"


@pytest.mark.parametrize(
    ("files", "found"),
    [
        ((), False),
        (("src/app.py", "README.md"), False),
        (("tests/test_app.py",), True),
        (("app_test.py",), True),
        (("tests/conftest.py", "testing.py"), False),
    ],
)
def test_test_files(tmp_path: Path, files: tuple[str, ...], found: bool) -> None:
    assert has_test_files(git_repo(tmp_path / "repo", *files)) is found


def test_ignored_test_files_and_a_folder_outside_git_count_as_none(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", "build/test_generated.py")
    (repo / ".gitignore").write_text("build/\n")
    assert not has_test_files(repo)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "test_a.py").write_text("")
    assert not has_test_files(plain)
