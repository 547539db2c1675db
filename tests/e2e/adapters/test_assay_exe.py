"""Where the running assay lives, and the coder's PATH that starts with it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from assay.adapters.assay_exe import assay_bin_dir, with_assay_on_path


def script(folder: Path, name: str = "assay", mode: int = 0o755) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(mode)
    return path


def test_the_entry_point_folder_when_started_as_an_assay_script(tmp_path: Path) -> None:
    entry = script(tmp_path / "venv" / "bin")
    assert assay_bin_dir(str(entry), executable="/nowhere/python") == entry.parent


def test_a_linked_entry_point_resolves_to_the_real_install(tmp_path: Path) -> None:
    real = script(tmp_path / "venv" / "bin")
    (tmp_path / "bin").mkdir()
    link = tmp_path / "bin" / "assay"
    link.symlink_to(real)
    assert assay_bin_dir(str(link), executable="/nowhere/python") == real.parent


def test_otherwise_the_assay_beside_the_interpreter(tmp_path: Path) -> None:
    beside = script(tmp_path / "venv" / "bin")
    python = tmp_path / "venv" / "bin" / "python"
    python.symlink_to(sys.executable)  # a venv's python links to the base interpreter
    found = assay_bin_dir("/usr/lib/python3/site-packages/pytest/__main__.py", str(python))
    assert found == beside.parent  # not the base interpreter's folder


def test_none_when_there_is_no_assay_script(tmp_path: Path) -> None:
    script(tmp_path / "bin", mode=0o644)  # not executable
    assert assay_bin_dir(str(tmp_path / "bin" / "assay"), str(tmp_path / "bin" / "python")) is None


def test_the_folder_goes_first_on_path_once(tmp_path: Path) -> None:
    folder = tmp_path / "venv" / "bin"
    env = {"PATH": os.pathsep.join(["/usr/bin", str(folder), "/bin"]), "HOME": "/h"}
    out = with_assay_on_path(env, folder)
    assert out["PATH"].split(os.pathsep) == [str(folder), "/usr/bin", "/bin"]
    assert out["HOME"] == "/h" and env["PATH"].startswith("/usr/bin")  # the input is untouched
    assert with_assay_on_path({}, folder)["PATH"] == str(folder)


def test_this_test_run_finds_the_worktree_assay() -> None:
    found = assay_bin_dir()
    assert found is not None and (found / "assay").is_file()
