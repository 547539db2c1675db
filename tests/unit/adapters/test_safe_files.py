"""Reading and writing where a coder may have been first: a link planted at any place on the
way is replaced or refused, never followed; a FIFO never blocks; sizes are limited."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from assay.adapters.safe_files import (
    append_file,
    create_file,
    ensure_folder,
    keep_copy,
    read_limited,
    remove_file,
    write_file,
)

SECRET = "the operator's secret\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """The operator's files: nothing here may be written, removed or read."""
    folder = tmp_path / "operator"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET)
    (folder / ".bashrc").write_text(SECRET)
    return folder


@pytest.fixture
def seat(tmp_path: Path) -> Path:
    folder = tmp_path / "seat"
    folder.mkdir()
    return folder.resolve()


def untouched(outside: Path) -> bool:
    return sorted(p.name for p in outside.iterdir()) == [".bashrc", "secret.txt"] and all(
        (outside / name).read_text() == SECRET for name in (".bashrc", "secret.txt")
    )


def within_a_second(call: object) -> None:
    """``call()`` returns within a second (a FIFO opened the blocking way never would)."""
    assert callable(call)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (call(), done.set()), daemon=True)
    thread.start()
    assert done.wait(1.0), "it blocked"


# -- writing -----------------------------------------------------------------------------------


@pytest.mark.parametrize("planted", ["a", "a/b", "a/b/c.txt"])
def test_a_link_at_any_place_on_the_way_is_replaced_never_followed(
    seat: Path, outside: Path, planted: str
) -> None:
    (seat / planted).parent.mkdir(parents=True, exist_ok=True)
    target = outside / ".bashrc" if planted.endswith(".txt") else outside
    (seat / planted).symlink_to(target)
    path = write_file(seat, "a/b/c.txt", "ours\n")
    assert path == seat / "a" / "b" / "c.txt" and path.read_text() == "ours\n"
    assert untouched(outside)
    assert not any(p.is_symlink() for p in (seat / "a", seat / "a/b", seat / "a/b/c.txt"))


def test_a_relative_link_up_the_tree_is_not_followed(seat: Path, outside: Path) -> None:
    (seat / "log.txt").symlink_to(os.path.relpath(outside / ".bashrc", seat))
    write_file(seat, "log.txt", b"ours")
    assert (seat / "log.txt").read_bytes() == b"ours" and untouched(outside)


def test_a_fifo_or_a_folder_at_the_file_s_place_is_replaced_without_blocking(
    seat: Path,
) -> None:
    os.mkfifo(seat / "fifo.log")
    (seat / "dir.log").mkdir()
    (seat / "dir.log" / "inside").write_text("x")
    within_a_second(lambda: write_file(seat, "fifo.log", "ours"))
    write_file(seat, "dir.log", "ours")
    assert (seat / "fifo.log").read_text() == (seat / "dir.log").read_text() == "ours"
    # The folder is moved aside, never walked (it may be deeper than any recursion).
    aside = [p for p in seat.iterdir() if p.name.startswith(".dir.log.displaced-")]
    assert len(aside) == 1 and (aside[0] / "inside").read_text() == "x"


def test_a_file_where_a_folder_belongs_is_replaced(seat: Path) -> None:
    (seat / "a").write_text("in the way")
    write_file(seat, "a/b.txt", "ours")
    assert (seat / "a" / "b.txt").read_text() == "ours"


def test_the_named_folder_itself_must_be_a_real_folder(
    tmp_path: Path, seat: Path, outside: Path
) -> None:
    linked = tmp_path / "linked"
    linked.symlink_to(outside)
    with pytest.raises(OSError):
        write_file(linked, "x.txt", "ours")
    with pytest.raises(OSError):
        create_file(linked / "x.log")
    assert untouched(outside)


@pytest.mark.parametrize("bad", ["", "/etc/passwd", "../up.txt", "a/../../up.txt"])
def test_a_path_that_is_not_below_the_folder_is_refused(seat: Path, bad: str) -> None:
    with pytest.raises(ValueError):
        write_file(seat, bad, "x")


def test_create_file_replaces_a_link_and_reads_back_what_was_written(
    seat: Path, outside: Path
) -> None:
    (seat / "coder.log.out").symlink_to(outside / "secret.txt")
    with create_file(seat / "coder.log.out") as handle:
        handle.write(b"child output")
        handle.seek(0)
        assert handle.read() == b"child output"
    assert (seat / "coder.log.out").read_bytes() == b"child output" and untouched(outside)


def test_append_file_refuses_a_link_and_a_fifo_without_blocking(seat: Path, outside: Path) -> None:
    (seat / "transcript.jsonl").symlink_to(outside / ".bashrc")
    with pytest.raises(OSError):
        append_file(seat / "transcript.jsonl")
    os.mkfifo(seat / "fifo.jsonl")

    def refused() -> None:
        with pytest.raises(OSError):
            append_file(seat / "fifo.jsonl")

    within_a_second(refused)
    with append_file(seat / "new.jsonl") as handle:
        handle.write(b"1\n")
    with append_file(seat / "new.jsonl") as handle:
        handle.write(b"2\n")
    assert (seat / "new.jsonl").read_bytes() == b"1\n2\n" and untouched(outside)


@pytest.mark.parametrize("planted", ["home", "home/AGENTS.override.md"])
def test_remove_file_removes_nothing_through_a_link(
    seat: Path, outside: Path, planted: str
) -> None:
    (seat / "home").mkdir()
    if planted == "home":
        (seat / "home").rmdir()
        (seat / "home").symlink_to(outside)
        remove_file(seat, "home/secret.txt")
    else:
        (seat / planted).symlink_to(outside / "secret.txt")
        remove_file(seat, planted)
        assert not os.path.lexists(seat / planted)  # the link itself goes
    assert untouched(outside)
    remove_file(seat, "missing/file.txt")  # nothing there: nothing to do


def test_ensure_folder_replaces_a_linked_folder(seat: Path, outside: Path) -> None:
    (seat / ".codex").symlink_to(outside)
    assert ensure_folder(seat, ".codex") == seat / ".codex"
    assert (seat / ".codex").is_dir() and not (seat / ".codex").is_symlink()
    assert untouched(outside)


# -- reading -----------------------------------------------------------------------------------


def test_a_regular_file_is_read_and_a_missing_one_is_silent(seat: Path) -> None:
    (seat / "out.json").write_bytes(b"{}")
    assert read_limited(seat / "out.json", seat, 10).data == b"{}"
    missing = read_limited(seat / "none.json", seat, 10)
    assert missing.data is None and missing.warning is None


def test_a_link_is_never_followed_when_read(seat: Path, outside: Path) -> None:
    (seat / "report.json").symlink_to(outside / "secret.txt")
    read = read_limited(seat / "report.json", seat, 1000)
    assert read.data is None and read.warning == "it is not a regular file (a symbolic link)"


def test_a_fifo_is_refused_without_blocking(seat: Path) -> None:
    os.mkfifo(seat / "history.md")
    started = time.monotonic()
    read = read_limited(seat / "history.md", seat, 1000)
    assert time.monotonic() - started < 1
    assert read.data is None and read.warning and "FIFO" in read.warning


def test_a_hard_link_to_a_file_elsewhere_is_refused(seat: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", seat / "report.json")
    read = read_limited(seat / "report.json", seat, 1000)
    assert read.data is None and read.warning and "hard link" in read.warning


def test_a_file_over_the_limit_is_refused_or_its_tail_read(seat: Path) -> None:
    (seat / "big.md").write_bytes(b"a" * 100 + b"the end")
    over = read_limited(seat / "big.md", seat, 50)
    assert over.data is None and over.warning and "over the 50 limit" in over.warning
    assert read_limited(seat / "big.md", seat, 7, tail=True).data == b"the end"
    assert read_limited(seat / "big.md", seat, 107).data == b"a" * 100 + b"the end"


def test_keep_copy_keeps_what_was_read_in_the_engine_s_folder(
    tmp_path: Path, seat: Path, outside: Path
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "traj.json").symlink_to(outside / ".bashrc")  # even there, never followed
    (seat / "traj.json").write_bytes(b"[1, 2]")
    read = keep_copy(seat / "traj.json", seat, 100, logs / "traj.json")
    assert read.data == b"[1, 2]" and (logs / "traj.json").read_bytes() == b"[1, 2]"
    (seat / "link.json").symlink_to(outside / "secret.txt")
    refused = keep_copy(seat / "link.json", seat, 100, logs / "link.json")
    assert refused.data is None and not (logs / "link.json").exists()
    assert untouched(outside)
