"""Removing and walking folders a coder shaped: deeper than the recursion limit, PATH_MAX and
the open-file limit, read-only, with links to the operator's files and FIFOs, on real trees."""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.deep import deep_tree, remove_deep

from assay.adapters import folders, redact
from assay.adapters.folders import remove_tree, walk

NOBODY = 65534


@pytest.fixture(autouse=True)
def _no_deep_tree_left(tmp_path: Path) -> Iterator[None]:
    """A deep tree a failed test left would crash pytest's own clean-up (see support.deep)."""
    yield
    remove_deep(tmp_path)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """The operator's files, which links in the tree point at."""
    place = tmp_path / "operator"
    (place / "sub").mkdir(parents=True)
    (place / "secret.txt").write_text("keep me\n")
    (place / "sub" / "kept.txt").write_text("keep me too\n")
    return place


@pytest.mark.parametrize("depth", [1_100, 5_000])
def test_a_tree_deeper_than_the_recursion_limit_and_path_max_is_removed(
    tmp_path: Path, depth: int
) -> None:
    tree = tmp_path / "seat"
    deep_tree(tree, depth)  # 5,000 levels: a path of 10,000 bytes, past PATH_MAX (4,096)
    started = time.monotonic()
    removal = remove_tree(tree)
    assert removal.complete, removal.summary()
    assert not tree.exists()
    assert time.monotonic() - started < 30


def test_a_tree_deeper_than_the_open_file_limit_is_removed(tmp_path: Path) -> None:
    """One folder open at a time: a tree 1,100 deep goes with 20 descriptors to spare."""
    tree = tmp_path / "seat"
    deep_tree(tree, 1_100)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 20, hard))
    try:
        removal = remove_tree(tree)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert removal.complete, removal.summary()
    assert not tree.exists()


def test_many_files_are_removed_quickly(tmp_path: Path) -> None:
    tree = tmp_path / "seat"
    for folder in range(5):
        (tree / f"s{folder}").mkdir(parents=True)
        fd = os.open(tree / f"s{folder}", os.O_RDONLY | os.O_DIRECTORY)
        for n in range(1_000):
            os.close(os.open(f"f{n}", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
        os.close(fd)
    started = time.monotonic()
    assert remove_tree(tree).complete
    assert not tree.exists()
    assert time.monotonic() - started < 30


def test_links_are_removed_never_followed(tmp_path: Path, outside: Path) -> None:
    tree = tmp_path / "seat"
    (tree / "a").mkdir(parents=True)
    (tree / "a" / "home").symlink_to(outside, target_is_directory=True)
    (tree / "a" / "secret.txt").symlink_to(outside / "secret.txt")
    (tree / "dangling").symlink_to(tmp_path / "nowhere")
    os.link(outside / "secret.txt", tree / "hard.txt")
    deep_tree(tree / "deep", 1_100)
    (tree / "deep" / "d" / "up").symlink_to(outside / "sub", target_is_directory=True)
    removal = remove_tree(tree)
    assert removal.complete, removal.summary()
    assert not tree.exists()
    assert (outside / "secret.txt").read_text() == "keep me\n"
    assert (outside / "sub" / "kept.txt").read_text() == "keep me too\n"


def test_a_link_given_as_the_tree_is_removed_not_its_target(tmp_path: Path, outside: Path) -> None:
    link = tmp_path / "seat"
    link.symlink_to(outside, target_is_directory=True)
    assert remove_tree(link).complete
    assert not link.is_symlink()
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt", "sub"]


def test_fifos_and_sockets_are_removed_without_being_opened(tmp_path: Path) -> None:
    import socket

    tree = tmp_path / "seat"
    (tree / "logs").mkdir(parents=True)
    os.mkfifo(tree / "logs" / "coder.log")  # opening it would wait for a writer forever
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(tree / "logs" / "s"))
        assert remove_tree(tree).complete
    assert not tree.exists()


def test_a_missing_path_is_nothing_to_do(tmp_path: Path) -> None:
    assert remove_tree(tmp_path / "never-made").complete


def _as_nobody(action: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``action`` run as an ordinary user (root passes every permission check, so a read-only
    folder only means something to someone else): in a forked child when we are root."""
    if os.geteuid() != 0:
        return action()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to nobody, act, report, never return into pytest
        code = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.write(write, json.dumps(action()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        out = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    result: dict[str, Any] = json.loads(out)
    return result


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder an ordinary user owns (pytest's own are root's and private)."""
    place = Path(tempfile.mkdtemp(prefix="assay-folders-"))
    if os.geteuid() == 0:
        os.chown(place, NOBODY, NOBODY)
    try:
        yield place
    finally:
        remove_deep(place)


def test_read_only_folders_are_made_writable_and_removed(shared: Path) -> None:
    def act() -> dict[str, Any]:
        tree = shared / "seat"
        deep_tree(tree / "deep", 1_100)
        (tree / "ro" / "inner").mkdir(parents=True)
        (tree / "ro" / "inner" / "f").write_text("x")
        (tree / "closed").mkdir()
        (tree / "closed" / "f").write_text("x")
        (tree / "write-only").mkdir()
        (tree / "write-only" / "f").write_text("x")
        os.chmod(tree / "ro" / "inner", 0o500)
        os.chmod(tree / "ro", 0o500)
        os.chmod(tree / "closed", 0o000)
        os.chmod(tree / "write-only", 0o300)
        os.chmod(tree / "deep" / "d" / "d", 0o500)
        os.chmod(tree, 0o500)
        removal = remove_tree(tree)
        return {"left": [str(x) for x in removal.left], "exists": tree.exists()}

    done = _as_nobody(act)
    assert done == {"left": [], "exists": False}


def test_what_cannot_be_removed_is_said_and_the_rest_goes(shared: Path) -> None:
    """Root's folder inside an ordinary user's tree: that user can neither empty it nor
    change it. The removal says which file and why, removes everything else, never raises."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make another user's folder")
    tree = shared / "seat"
    deep_tree(tree / "deep", 1_100)
    locked = tree / "deep" / "d" / "locked"
    locked.mkdir()
    (locked / "f").write_text("x")
    (tree / "other").mkdir()
    (tree / "other" / "g").write_text("x")
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(tree)], check=True)
    os.chown(locked, 0, 0)
    os.chown(locked / "f", 0, 0)

    def act() -> dict[str, Any]:
        removal = remove_tree(tree)
        return {
            "left": [(x.path, x.reason) for x in removal.left],
            "summary": removal.summary(),
            "left_on_disk": sorted(p.name for p in tree.iterdir()),
        }

    done = _as_nobody(act)
    assert done["left"] == [[str(locked / "f"), "Permission denied"]]
    assert done["summary"] == f"{locked / 'f'}: Permission denied"
    assert done["left_on_disk"] == ["deep"]  # "other" went; the way down to "locked" stays
    assert not (tree / "deep" / "d" / "d").exists()  # the 1,098 folders below went too


def test_an_immutable_file_is_said_with_its_path(tmp_path: Path) -> None:
    tree = tmp_path / "seat"
    deep_tree(tree, 300)
    stuck = tree / "d" / "d" / "stuck"
    stuck.write_text("x")
    if subprocess.run(["chattr", "+i", str(stuck)], check=False, capture_output=True).returncode:
        pytest.skip("chattr +i is not allowed here")
    try:
        removal = remove_tree(tree)
        assert [(x.path, x.reason) for x in removal.left] == [
            (str(stuck), "Operation not permitted")
        ]
        left = walk(tree, max_entries=100, max_depth=100)
        assert sorted(e.path.name for e in left) == ["d", "d", "stuck"]
    finally:
        subprocess.run(["chattr", "-i", str(stuck)], check=True)
    assert remove_tree(tree).complete


def test_a_mount_point_inside_is_left_alone(tmp_path: Path) -> None:
    tree = tmp_path / "seat"
    mounted = tree / "a" / "mnt"
    mounted.mkdir(parents=True)
    (tree / "a" / "f").write_text("x")
    if subprocess.run(
        ["mount", "-t", "tmpfs", "none", str(mounted)], check=False, capture_output=True
    ).returncode:
        pytest.skip("mounting is not allowed here")
    try:
        (mounted / "theirs").write_text("not this tree's")
        removal = remove_tree(tree)
        assert [(x.path, x.reason) for x in removal.left] == [
            (str(mounted), "another file system is mounted here")
        ]
        assert (mounted / "theirs").read_text() == "not this tree's"
        assert not (tree / "a" / "f").exists()
    finally:
        subprocess.run(["umount", str(mounted)], check=True)
    assert remove_tree(tree).complete


def test_a_very_deep_path_is_shown_shortened() -> None:
    removal = folders.Removal(Path("/x"))
    removal._fail(lambda: "/x/" + "d/" * 3000 + "f", "Permission denied")
    shown = removal.left[0].path
    assert len(shown) < 400 and shown.startswith("/x/d/d/") and shown.endswith("d/d/f")
    assert "(2" in shown and "more folders)" in shown


def test_failures_past_the_first_twenty_are_counted(tmp_path: Path) -> None:
    removal = folders.Removal(tmp_path)
    for n in range(25):
        removal._fail(lambda n=n: f"/x/{n}", "Permission denied")  # type: ignore[misc]
    assert len(removal.left) == folders.MAX_REPORTED and removal.more == 5
    assert removal.summary() == "/x/0: Permission denied (and 24 more)"


# -- walking ----------------------------------------------------------------------------------


def test_a_walk_lists_every_entry_and_follows_no_link(tmp_path: Path, outside: Path) -> None:
    tree = tmp_path / "seat"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "f.txt").write_text("x")
    (tree / "top.txt").write_text("x")
    (tree / "home").symlink_to(outside, target_is_directory=True)
    os.mkfifo(tree / "a" / "pipe")
    listed = walk(tree, max_entries=100, max_depth=10)
    found = {e.path.relative_to(tree).as_posix(): e for e in listed}
    assert sorted(found) == ["a", "a/b", "a/b/f.txt", "a/pipe", "home", "top.txt"]
    assert stat.S_ISLNK(found["home"].info.st_mode) and not found["home"].is_dir
    assert stat.S_ISFIFO(found["a/pipe"].info.st_mode) and not found["a/pipe"].is_file
    assert found["a/b/f.txt"].depth == 3
    assert listed.complete


def test_a_walk_stops_at_its_bounds_and_says_so(tmp_path: Path) -> None:
    tree = tmp_path / "seat"
    deep_tree(tree, 1_100, every=1)
    deep = walk(tree, max_entries=10**6, max_depth=50)
    assert max(e.depth for e in deep) == 50
    assert len(deep.cut) == 1 and "deeper than 50 folders" in deep.cut[0]
    assert len(deep.cut[0]) < 400
    many = walk(tree, max_entries=30, max_depth=10**4)
    assert len(list(many)) == 30
    assert "more than 30 entries" in many.cut[0]


def test_a_walk_skips_what_it_is_told_to(tmp_path: Path) -> None:
    (tmp_path / ".git" / "objects").mkdir(parents=True)
    (tmp_path / "a.txt").write_text("x")
    listed = walk(tmp_path, max_entries=10, max_depth=5, skip=lambda e: e.path.name == ".git")
    assert [e.path.name for e in listed] == ["a.txt"]


def test_redaction_walks_a_deep_tree_with_fifos_within_bounds(tmp_path: Path) -> None:
    key = "AKIA" + "Q" * 16
    attempt = tmp_path / "attempt-1"
    deep_tree(attempt / "seat-1" / "deep", 1_100)
    (attempt / "seat-1" / "coder.log").write_text(f"the key {key}\n")
    os.mkfifo(attempt / "seat-1" / "coder.log.out")  # would block a reader forever
    redactor = redact.Redactor(redact.redactions([("AWS Access Key", key)]))
    changed, failed = redactor.tree(attempt)
    assert changed == [attempt / "seat-1" / "coder.log"]
    assert key not in (attempt / "seat-1" / "coder.log").read_text()
    assert [path for path, _ in failed] == [attempt]  # the part below the depth bound, said
    assert "deeper than" in str(failed[0][1])
    assert remove_tree(tmp_path / "attempt-1").complete
