"""assay's own writes for a run: a machine fault is an EnvironmentFault named by its cause."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from assay.adapters.process import EnvironmentFault
from assay.adapters.run_files import cause_of, fault_of, make_folder, writing


def test_a_file_where_the_folder_goes_is_named(tmp_path: Path) -> None:
    (tmp_path / "seat-1").write_text("not a folder")
    with pytest.raises(EnvironmentFault, match=r"a folder of the run is not a folder: .*seat-1$"):
        make_folder(tmp_path / "seat-1")


def test_a_file_where_a_parent_folder_goes_is_named(tmp_path: Path) -> None:
    (tmp_path / "attempt-2").write_text("not a folder")
    with pytest.raises(EnvironmentFault, match=r"not a folder writing .*attempt-2/seat-1$"):
        make_folder(tmp_path / "attempt-2" / "seat-1")


def test_a_folder_is_made_with_its_parents(tmp_path: Path) -> None:
    make_folder(tmp_path / "a" / "b")
    make_folder(tmp_path / "a" / "b")  # again: nothing to do
    assert (tmp_path / "a" / "b").is_dir()


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.EFBIG, "hit the file-size limit (RLIMIT_FSIZE) writing /run/x"),
        (errno.ENOSPC, "no space left on device writing /run/x"),
        (errno.EDQUOT, "no space left on device writing /run/x"),
        (errno.EROFS, "the run folder is not writable: /run/x"),
        (errno.ENOTDIR, "a folder of the run is not a folder writing /run/x"),
    ],
)
def test_machine_faults_name_the_file_they_hit(code: int, words: str) -> None:
    fault = fault_of(OSError(code, os.strerror(code), "/run/x"), Path("/elsewhere"))
    assert fault is not None and words in str(fault)


def test_a_write_without_a_file_name_names_the_fallback() -> None:
    fault = fault_of(OSError(errno.ENOSPC, "full"), Path("/run/seat"))
    assert fault is not None and str(fault) == "no space left on device writing /run/seat"


def test_other_errors_pass_unchanged(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError), writing(tmp_path):
        raise FileNotFoundError(errno.ENOENT, "missing", str(tmp_path / "x"))


def test_causes_in_words() -> None:
    assert cause_of(OSError(errno.EFBIG, "File too large")) == (
        "the file-size limit (RLIMIT_FSIZE) was reached"
    )
    assert cause_of(OSError(errno.ENOSPC, "x")) == "no space left on device"
    assert cause_of(OSError(errno.EISDIR, "Is a directory")) == "Is a directory"
