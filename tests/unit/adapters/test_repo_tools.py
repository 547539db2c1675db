"""A validator's PATH: the repository's own tool folders first, assay's virtualenv last."""

from __future__ import annotations

import os
from pathlib import Path

from assay.adapters.assay_exe import assay_venv_bins
from assay.adapters.repo_tools import (
    REPO_TOOL_FOLDERS,
    repo_tool_folders,
    repo_tool_roots,
    validator_path,
    with_repo_tools,
)


def venv(root: Path) -> Path:
    """A virtualenv's shape: ``pyvenv.cfg`` and its ``bin``."""
    (root / "bin").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return root / "bin"


def test_the_repository_folders_that_exist_in_their_order(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    assert repo_tool_folders(repo) == []
    npm = repo / "node_modules" / ".bin"
    npm.mkdir(parents=True)
    plain = venv(repo / "venv")
    dotted = venv(repo / ".venv")
    assert REPO_TOOL_FOLDERS == (".venv/bin", "venv/bin", "node_modules/.bin")
    assert repo_tool_folders(repo) == [dotted, plain, npm]
    assert repo_tool_roots(repo) == [repo / ".venv", repo / "venv", repo / "node_modules"]


def test_a_linked_virtualenv_is_named_by_its_real_path(tmp_path: Path) -> None:
    # poetry keeps its virtualenvs elsewhere; `.venv` a link to one is the repository's own
    real = venv(tmp_path / "cache" / "proj-py3.11")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".venv").symlink_to(real.parent)
    assert repo_tool_folders(repo) == [real]
    assert repo_tool_roots(repo) == [real.parent]


def test_repository_tools_first_then_the_path_in_its_order(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    tools = venv(repo / ".venv")
    path = os.pathsep.join(["/usr/local/bin", str(tools), "/usr/bin", "", "/usr/bin"])
    assert validator_path(path, repo, []).split(os.pathsep) == [
        str(tools),
        "/usr/local/bin",
        "/usr/bin",
    ]


def test_assay_virtualenv_goes_last_never_ahead_of_the_users_tools(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    assay = venv(tmp_path / "assay-venv")
    activated = os.pathsep.join([str(assay), "/usr/local/bin", "/usr/bin"])
    assert validator_path(activated, repo, [assay]).split(os.pathsep) == [
        "/usr/local/bin",
        "/usr/bin",
        str(assay),
    ]
    # never added when the PATH did not have it
    assert validator_path("/usr/bin", repo, [assay]) == "/usr/bin"
    # a link to it on the PATH is the same folder
    (tmp_path / "linked").symlink_to(assay)
    linked = os.pathsep.join([str(tmp_path / "linked"), "/usr/bin"])
    assert validator_path(linked, repo, [assay]).split(os.pathsep)[0] == "/usr/bin"
    # with the repository's own virtualenv, that one comes first
    tools = venv(repo / ".venv")
    assert validator_path(activated, repo, [assay]).split(os.pathsep)[0] == str(tools)


def test_assay_installed_in_the_repository_virtualenv_stays_first(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    tools = venv(repo / ".venv")
    path = os.pathsep.join(["/usr/bin", str(tools)])
    assert validator_path(path, repo, [tools]).split(os.pathsep) == [str(tools), "/usr/bin"]


def test_with_repo_tools_changes_only_the_path(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    tools = venv(repo / "venv")
    env = {"PATH": "/usr/bin", "HOME": "/h", "LANG": "C"}
    out = with_repo_tools(env, repo, [])
    assert out == {**env, "PATH": os.pathsep.join([str(tools), "/usr/bin"])}
    assert env["PATH"] == "/usr/bin"  # not changed in place


def test_assay_virtualenv_bins_only_of_a_virtualenv(tmp_path: Path) -> None:
    bin_dir = venv(tmp_path / "venv")
    entry = bin_dir / "assay"
    entry.write_text("#!/bin/sh\n")
    entry.chmod(0o755)
    found = assay_venv_bins(str(entry), "/nowhere/python", prefix="/p", base_prefix="/p")
    assert found == [bin_dir.resolve()]
    # an assay script in a shared folder (pip --user, /usr/local/bin) is not a virtualenv
    shared = tmp_path / "local" / "bin"
    shared.mkdir(parents=True)
    (shared / "assay").write_text("#!/bin/sh\n")
    (shared / "assay").chmod(0o755)
    assert assay_venv_bins(str(shared / "assay"), "/nowhere/python", "/p", "/p") == []
    # run as `python -m assay` from a virtualenv: its bin folder
    inside = assay_venv_bins("-m", "/nowhere/python", str(bin_dir.parent), "/usr")
    assert inside == [bin_dir.resolve()]
