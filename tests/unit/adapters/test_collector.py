"""The collector, run in this process on real seats: exactly the bytes the coder left, nothing
of the seat's .git used, budgets checked before anything is hashed, no crash on hostile trees."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.seat_repo import collect, make_repo, make_seat, sh, tree_entries, write

from assay.adapters import seats
from assay.adapters.capture import CaptureLimits
from assay.adapters.collector import exclude_pattern

pytestmark = pytest.mark.usefixtures("isolated_git")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "repo",
        {
            ".gitattributes": "* text=auto\n",
            ".gitignore": "*.log\nbuild/\n",
            "a.txt": "a\n",
            "check.sh": "#!/bin/sh\nexit 1\n",
            "kept.log": "tracked although ignored\n",
        },
    )


def capture_of(repo: Path, worktree: Path, out: Path, **limits: int):  # type: ignore[no-untyped-def]
    base = sh(repo, "rev-parse", "HEAD").decode().strip()
    return collect(worktree, base, list(seats.object_stores(repo)), out, CaptureLimits(**limits))


def test_the_tree_holds_exactly_the_bytes_modes_and_links_the_coder_left(
    repo: Path, tmp_path: Path
) -> None:
    seat = make_seat(repo)
    write(seat.path, {"win.txt": b"one\r\ntwo\r\n", "tool.sh": "#!/bin/sh\n", "a.txt": "b\r\n"})
    (seat.path / "tool.sh").chmod(0o755)
    (seat.path / "link").symlink_to("a.txt")
    (seat.path / "dangling").symlink_to("/etc/passwd")
    capture = capture_of(repo, seat.path, tmp_path / "out")
    assert capture.ok and capture.error is None, capture
    got = tree_entries(tmp_path / "out" / "git", capture.tree or "")
    assert got["win.txt"] == ("100644", b"one\r\ntwo\r\n")  # `* text=auto` converted nothing
    assert got["a.txt"] == ("100644", b"b\r\n")
    assert got["tool.sh"][0] == "100755"
    assert got["link"] == ("120000", b"a.txt")
    assert got["dangling"] == ("120000", b"/etc/passwd")  # stored as a link, never followed
    # The same content in a plain repository, conversions off, gives the same tree.
    plain = tmp_path / "plain"
    shutil.copytree(seat.path, plain, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    sh(plain, "init", "-q")
    (plain / ".git" / "info").mkdir(exist_ok=True)
    (plain / ".git" / "info" / "attributes").write_text("* -text\n")
    sh(plain, "add", "-A", "-f")
    assert sh(plain, "write-tree").decode().strip() == capture.tree
    assert capture.pack is not None and capture.pack.is_file()


def test_a_nested_repository_is_forbidden_kept_out_and_its_fsmonitor_never_runs(
    repo: Path, tmp_path: Path
) -> None:
    seat = make_seat(repo)
    marker = tmp_path / "hook-ran"
    nested = seat.path / "sub"
    nested.mkdir()
    sh(nested, "init", "-q")
    write(nested, {"inner.txt": "x\n"})
    sh(nested, "add", "-A")
    sh(nested, "commit", "-q", "-m", "inner")
    sh(nested, "config", "core.fsmonitor", f"touch {marker}; false")
    deep = seat.path / "pkg" / "vendored"
    deep.mkdir(parents=True)
    (deep / ".git").write_text("gitdir: /elsewhere\n")
    write(seat.path, {"pkg/mine.py": "x = 1\n", "pkg/vendored/v.py": "v = 1\n"})
    capture = capture_of(repo, seat.path, tmp_path / "out")
    assert capture.ok, capture
    assert capture.forbidden == ("pkg/vendored/.git", "sub/.git")
    got = tree_entries(tmp_path / "out" / "git", capture.tree or "")
    assert "pkg/mine.py" in got
    assert not [p for p in got if p.startswith(("sub", "pkg/vendored"))]
    assert not [p for p in capture.ignored if p.startswith(("sub", "pkg/vendored"))]
    assert not marker.exists()


def test_a_repository_in_an_ignored_folder_is_no_part_of_the_candidate_and_no_breach(
    repo: Path, tmp_path: Path
) -> None:
    seat = make_seat(repo)
    write(seat.path, {".gitignore": ".venv/\n", "mine.py": "x = 1\n"})
    installed = seat.path / ".venv" / "src" / "dep"
    installed.mkdir(parents=True)
    sh(installed, "init", "-q")
    write(installed, {"dep.py": "d = 1\n"})
    capture = capture_of(repo, seat.path, tmp_path / "out")
    assert capture.ok, capture
    assert capture.forbidden == ()
    assert ".venv/" in capture.ignored
    got = tree_entries(tmp_path / "out" / "git", capture.tree or "")
    assert "mine.py" in got and not [p for p in got if p.startswith(".venv")]


def test_a_submodule_folder_with_a_repository_in_it_runs_no_hook(tmp_path: Path) -> None:
    upstream = make_repo(tmp_path / "upstream", {"f": "f\n"})
    repo = make_repo(tmp_path / "repo", {"a": "a\n"})
    sh(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(upstream), "sub")
    sh(repo, "commit", "-q", "-m", "submodule")
    seat = make_seat(repo)
    marker = tmp_path / "hook-ran"
    inner = seat.path / "sub"
    shutil.copytree(upstream / ".git", inner / ".git")
    sh(inner, "checkout", "-q", "-f", "HEAD")
    sh(inner, "config", "core.fsmonitor", f"touch {marker}; false")
    # git would run a `status` in the submodule, which hashes a changed file through its filter
    sh(inner, "config", "filter.evil.clean", f"touch {marker}; cat")
    (inner / ".git" / "info").mkdir(exist_ok=True)
    (inner / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    write(inner, {"f": "g\n"})  # the same size: only its content tells
    capture = capture_of(repo, seat.path, tmp_path / "out")
    assert capture.ok, capture
    assert capture.forbidden == ()  # the base's own submodule, checked out: no breach
    got = tree_entries(tmp_path / "out" / "git", capture.tree or "")
    assert got["sub"] == ("160000", sh(repo, "rev-parse", "HEAD:sub").strip())  # as the base
    assert not marker.exists()


def test_replace_refs_and_skip_worktree_bits_in_the_seat_change_nothing(
    repo: Path, tmp_path: Path
) -> None:
    seat = make_seat(repo)
    base = sh(seat.path, "rev-parse", "HEAD").decode().strip()
    # A fake base that already has the workflow and the key, put in place of the real one.
    write(seat.path, {".github/workflows/ci.yml": "on: push\n", "key.txt": "AKIA0000\n"})
    sh(seat.path, "add", "-A")
    sh(seat.path, "commit", "-q", "-m", "fake")
    fake = sh(seat.path, "rev-parse", "HEAD").decode().strip()
    sh(seat.path, "replace", base, fake)
    sh(seat.path, "reset", "-q", "--soft", base)
    # check.sh rewritten to pass, hidden from the seat's own index.
    write(seat.path, {"check.sh": "#!/bin/sh\nexit 0\n", "a.txt": "edited\n"})
    sh(seat.path, "update-index", "--skip-worktree", "check.sh")
    assert b"check.sh" not in sh(seat.path, "status", "--porcelain")
    capture = capture_of(repo, seat.path, tmp_path / "out")
    assert capture.ok, capture
    got = tree_entries(tmp_path / "out" / "git", capture.tree or "")
    assert got["check.sh"][1] == b"#!/bin/sh\nexit 0\n"
    assert got[".github/workflows/ci.yml"][1] == b"on: push\n"
    assert got["key.txt"][1] == b"AKIA0000\n"
    # The objects live in the capture's own store: compared there.
    env = {**os.environ, "GIT_DIR": str(tmp_path / "out" / "git"), "GIT_NO_REPLACE_OBJECTS": "1"}
    listed = subprocess.run(
        ["git", "diff-tree", "-r", "--name-only", base, capture.tree or ""],
        env=env,
        capture_output=True,
        check=True,
    ).stdout.decode()
    assert set(listed.split()) == {".github/workflows/ci.yml", "key.txt", "check.sh", "a.txt"}


def test_only_the_repository_s_own_ignore_files_apply_and_ignored_files_are_named(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    operator = tmp_path / "operator"
    (operator / ".config" / "git").mkdir(parents=True)
    (operator / ".config" / "git" / "ignore").write_text("*.py\n")
    (operator / "global-ignore").write_text("*.py\n")
    (operator / "gitconfig").write_text(f"[core]\n\texcludesFile = {operator / 'global-ignore'}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(operator / "gitconfig"))
    monkeypatch.setenv("HOME", str(operator))
    monkeypatch.delenv("GIT_CONFIG_NOSYSTEM")
    seat = make_seat(repo)
    write(
        seat.path,
        {
            "data/.gitignore": "ignored.py\n",
            "data/ignored.py": "x\n",
            "data/kept.py": "y\n",
            "run.log": "noise\n",
            "build/out.bin": "b\n",
            "kept.log": "tracked, ignored, and edited\n",
        },
    )
    capture = capture_of(repo, seat.path, tmp_path / "out")
    assert capture.ok, capture
    got = tree_entries(tmp_path / "out" / "git", capture.tree or "")
    assert "data/kept.py" in got  # the operator's global ignore is not applied
    assert "data/ignored.py" not in got
    assert got["kept.log"][1] == b"tracked, ignored, and edited\n"  # tracked stays tracked
    assert set(capture.ignored) == {"build/", "data/ignored.py", "run.log"}
    assert capture.ignored_count == 3


@pytest.mark.parametrize(
    ("limits", "files", "expected"),
    [
        ({"max_files": 2}, {"n1": "1", "n2": "2", "n3": "3"}, "3 new files over max_files 2"),
        (
            {"max_file_bytes": 1000},
            {"big/data.txt": "x" * 2000},
            "a file of 2,000 bytes over max_file_bytes 1,000: big/data.txt",
        ),
        (
            {"max_bytes": 1500},
            {"one.txt": "x" * 1000, "two.txt": "y" * 1000},
            "2,000 bytes of new and changed files over max_bytes 1,500",
        ),
        (
            {"max_depth": 3},
            {"a/b/c/d.txt": "deep"},
            "a path of more than 3 components over max_depth 3: a/b/c/d.txt",
        ),
    ],
)
def test_each_budget_stops_the_capture_before_anything_is_hashed(
    repo: Path, tmp_path: Path, limits: dict[str, int], files: dict[str, str], expected: str
) -> None:
    seat = make_seat(repo)
    write(seat.path, files)
    capture = capture_of(repo, seat.path, tmp_path / "out", **limits)
    assert capture.over_budget is not None and capture.over_budget.startswith(expected)
    assert capture.tree is None and capture.pack is None and not capture.ok
    objects = tmp_path / "out" / "git" / "objects"
    assert sorted(p.name for p in objects.iterdir()) == ["info", "pack"]  # nothing written
    assert not list((objects / "pack").iterdir())


def test_a_big_file_the_base_has_at_that_size_is_within_budget(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"big.bin": b"\0" * 5000, "a": "a\n"})
    seat = make_seat(repo)
    write(seat.path, {"a": "b\n"})
    capture = capture_of(repo, seat.path, tmp_path / "out", max_file_bytes=1000)
    assert capture.ok, capture
    write(seat.path, {"big.bin": b"\1" * 5001})
    capture = capture_of(repo, seat.path, tmp_path / "out2", max_file_bytes=1000)
    assert capture.over_budget == "a file of 5,001 bytes over max_file_bytes 1,000: big.bin"


DEEP = 1100


@pytest.fixture
def deep_seat(repo: Path) -> Iterator[Path]:
    """A seat holding a chain of 1,100 folders, made and removed by descriptor (the whole path
    is longer than the system allows; a recursive removal would hit Python's limit)."""
    seat = make_seat(repo).path
    fds = [os.open(seat, os.O_RDONLY)]
    for _ in range(DEEP):
        os.mkdir("folder", dir_fd=fds[-1])
        fds.append(os.open("folder", os.O_RDONLY, dir_fd=fds[-1]))
    os.close(fds.pop())
    yield seat
    while fds:
        fd = fds.pop()
        os.rmdir("folder", dir_fd=fd)
        os.close(fd)


def test_a_folder_1100_deep_is_a_clear_over_budget_not_a_recursion_error(
    repo: Path, deep_seat: Path, tmp_path: Path
) -> None:
    capture = capture_of(repo, deep_seat, tmp_path / "out")
    assert capture.over_budget is not None
    assert capture.over_budget.startswith("a path of more than 64 components over max_depth 64")
    capture = capture_of(repo, deep_seat, tmp_path / "out2", max_depth=5000)
    assert capture.over_budget is not None and "too long" in capture.over_budget
    assert capture.error is None


def test_fifos_sockets_are_skipped_and_never_hang_the_capture(repo: Path, tmp_path: Path) -> None:
    seat = make_seat(repo)
    os.mkfifo(seat.path / "pipe")
    (seat.path / "a.txt").unlink()
    os.mkfifo(seat.path / "a.txt")  # where the base has a file
    write(seat.path, {"new.txt": "n\n"})
    capture = capture_of(repo, seat.path, tmp_path / "out")
    assert capture.ok, capture
    assert capture.specials == ("a.txt", "pipe")
    got = tree_entries(tmp_path / "out" / "git", capture.tree or "")
    assert "pipe" not in got and "a.txt" not in got and "new.txt" in got


def test_a_seat_git_replaced_by_a_link_or_missing_is_not_read(repo: Path, tmp_path: Path) -> None:
    seat = make_seat(repo)
    shutil.rmtree(seat.git_dir)
    seat.git_dir.symlink_to(repo / ".git")
    write(seat.path, {"a.txt": "z\n"})
    capture = capture_of(repo, seat.path, tmp_path / "out")
    assert capture.ok, capture
    assert capture.forbidden == ()
    assert tree_entries(tmp_path / "out" / "git", capture.tree or "")["a.txt"][1] == b"z\n"


def test_names_that_are_no_utf8_are_shown_escaped(repo: Path, tmp_path: Path) -> None:
    seat = make_seat(repo)
    os.mkfifo(os.path.join(os.fsencode(seat.path), b"pipe-\xff"))
    capture = capture_of(repo, seat.path, tmp_path / "out")
    assert capture.ok, capture
    assert capture.specials == ("pipe-\\xff",)
    capture.specials[0].encode("utf-8")  # no lone surrogate left


def test_exclude_patterns_match_names_literally() -> None:
    assert exclude_pattern("a*b/[x]/ !#/") == "/a\\*b/\\[x\\]/\\ \\!\\#/"
    assert exclude_pattern("line\nbreak/") == "/line?break/"
    assert exclude_pattern(".GIT") == "/.GIT"
