"""The coder's report file is read only when it is a small regular file in the seat folder."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from assay.adapters.report_file import MAX_REPORT_BYTES, read_at_most, read_report_file
from assay.core.report import read_coder_report


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    seat = tmp_path / "runs" / "r1" / "attempt-1" / "seat-1"
    seat.mkdir(parents=True)
    return seat.resolve()


def test_a_regular_report_is_read(folder: Path) -> None:
    (folder / "report.json").write_text(json.dumps({"stop_reason": "completed"}))
    read = read_report_file(folder / "report.json", folder)
    assert read.warning is None
    report, reason = read_coder_report(read.data)
    assert reason is None and report is not None and report.stop_reason == "completed"


def test_no_report_is_silent(folder: Path) -> None:
    read = read_report_file(folder / "report.json", folder)
    assert read.data is None and read.warning is None


def test_a_fifo_is_skipped_without_blocking(folder: Path) -> None:
    os.mkfifo(folder / "report.json")
    started = time.monotonic()
    read = read_report_file(folder / "report.json", folder)
    assert time.monotonic() - started < 1
    assert read.data is None and read.warning and "FIFO" in read.warning


def test_a_directory_is_skipped(folder: Path) -> None:
    (folder / "report.json").mkdir()
    read = read_report_file(folder / "report.json", folder)
    assert read.data is None and read.warning and "directory" in read.warning


def test_a_symlink_to_etc_passwd_is_not_followed(folder: Path) -> None:
    (folder / "report.json").symlink_to("/etc/passwd")
    read = read_report_file(folder / "report.json", folder)
    assert read.data is None and read.warning and "symbolic link" in read.warning


def test_a_symlink_to_a_file_outside_is_not_followed(folder: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"summary": "from outside"}))
    (folder / "report.json").symlink_to(outside)
    read = read_report_file(folder / "report.json", folder)
    assert read.data is None and read.warning


def test_a_symlinked_parent_that_escapes_the_folder_is_refused(
    folder: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "report.json").write_text(json.dumps({"summary": "elsewhere"}))
    (folder / "link").symlink_to(elsewhere)
    read = read_report_file(folder / "link" / "report.json", folder)
    assert read.data is None and read.warning and "inside the run's folder" in read.warning


def test_a_two_mib_report_is_discarded_with_a_warning(folder: Path) -> None:
    (folder / "report.json").write_bytes(b" " * (2 * MAX_REPORT_BYTES))
    read = read_report_file(folder / "report.json", folder)
    assert read.data is None and read.warning and "limit" in read.warning


def test_exactly_the_limit_is_read(folder: Path) -> None:
    (folder / "report.json").write_bytes(b" " * MAX_REPORT_BYTES)
    read = read_report_file(folder / "report.json", folder)
    assert read.warning is None and read.data is not None and len(read.data) == MAX_REPORT_BYTES


def test_invalid_utf8_is_read_then_discarded_by_the_parser(folder: Path) -> None:
    (folder / "report.json").write_bytes(b'{"summary": "\xff\xfe"}')
    read = read_report_file(folder / "report.json", folder)
    report, reason = read_coder_report(read.data)
    assert report is None and reason == "it is not UTF-8 text"


def test_deeply_nested_json_is_discarded_without_raising(folder: Path) -> None:
    (folder / "report.json").write_text("[" * 200_000 + "]" * 200_000)
    read = read_report_file(folder / "report.json", folder)
    report, reason = read_coder_report(read.data)
    assert report is None and reason


def test_an_unreadable_report_is_a_warning(folder: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    path = folder / "report.json"
    path.write_text("{}")
    path.chmod(0)
    read = read_report_file(path, folder)
    assert read.data is None and read.warning and "could not be opened" in read.warning


def test_a_hard_link_to_a_file_outside_is_not_read(folder: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps({"summary": "a secret"}))
    os.link(outside, folder / "report.json")
    read = read_report_file(folder / "report.json", folder)
    assert read.data is None and read.warning and "hard link" in read.warning


def test_read_at_most_stops_one_byte_past_the_limit_of_a_stream_still_growing() -> None:
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"x" * 40)  # more than the limit, and the writer never closes
        assert read_at_most(read_end, 16) == b"x" * 17
        assert os.read(read_end, 100) == b"x" * 23  # the rest was left unread
    finally:
        os.close(read_end)
        os.close(write_end)


def test_read_at_most_returns_a_short_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "small"
    path.write_bytes(b"abc")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert read_at_most(fd, 16) == b"abc"
    finally:
        os.close(fd)
