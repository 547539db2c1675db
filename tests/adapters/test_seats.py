"""Seat repositories against real temporary repositories: a clone of the base commit that
borrows the user's objects, checked and reset after the coder, fetched back only on request."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.deep import deep_tree, remove_deep
from support.repo import git as sh

from assay.adapters import git, seats


@pytest.fixture(autouse=True)
def _isolated_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-global-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    sh(root, "init", "-q", "-b", "main")
    (root / "src" / "a.py").write_text("a = 1\n")
    (root / ".gitignore").write_text("*.log\n")
    sh(root, "add", "-A")
    sh(root, "commit", "-q", "-m", "base")
    git.ensure_excluded(root)
    return root


def make_seat(repo: Path, run: str = "r1", n: int = 1) -> seats.Seat:
    path = seats.seat_path(repo / ".assay", run, f"seat-{n}")
    return seats.create_seat(repo, path, git.head_commit(repo), git.seat_branch(run, f"seat-{n}"))


def has_object(repo: Path, oid: str) -> bool:
    found = subprocess.run(["git", "-C", str(repo), "cat-file", "-e", oid], check=False)
    return found.returncode == 0


def user_state(repo: Path) -> tuple[bytes, list[str], str]:
    hooks = sorted(p.name for p in (repo / ".git" / "hooks").iterdir())
    return (repo / ".git" / "config").read_bytes(), hooks, sh(repo, "show-ref")


def test_a_seat_is_its_own_repository_on_its_branch_with_borrowed_objects(repo: Path) -> None:
    before = user_state(repo)
    seat = make_seat(repo, "run-7", 2)
    assert seat.path == repo / ".assay" / "seats" / "run-7" / "seat-2"
    assert seat.home == repo / ".assay" / "seats" / "run-7" / "seat-2.home" and seat.home.is_dir()
    assert (seat.git_dir).is_dir()  # a repository, not a worktree's ``gitdir:`` file
    assert git.current_branch(seat.path) == "assay/run-7/seat-2"
    assert git.head_commit(seat.path) == git.head_commit(repo)
    assert (seat.path / "src" / "a.py").read_text() == "a = 1\n"
    assert sh(seat.path, "remote") == "" and list((seat.git_dir / "hooks").iterdir()) == []
    alternates = (seat.git_dir / "objects" / "info" / "alternates").read_text()
    assert alternates == f"{(repo / '.git' / 'objects').resolve()}\n"
    assert sh(seat.path, "count-objects") == "0 objects, 0 kilobytes"  # nothing copied
    assert not git.is_dirty(seat.path) and not git.is_dirty(repo)
    # The user's repository knows nothing of the seat: no branch, no worktree, same config.
    assert user_state(repo) == before
    assert sh(repo, "worktree", "list").count("\n") == 0


def test_the_change_is_read_and_checkpointed_in_the_seat_only(repo: Path) -> None:
    seat = make_seat(repo)
    (seat.path / "src" / "a.py").write_text("a = 2\n")
    (seat.path / "src" / "b.py").write_text("b = 1\n")
    change = git.read_changes(seat.path, git.head_commit(repo))
    assert change.paths == ["src/a.py", "src/b.py"]
    commit = git.commit_all(seat.path, "assay: attempt 1, seat 1")
    assert commit is not None and git.head_commit(seat.path) == commit
    assert not has_object(repo, commit)  # the checkpoint is the seat's alone


def test_the_candidate_is_one_commit_on_the_base_whatever_history_the_coder_made(
    repo: Path,
) -> None:
    seat = make_seat(repo)
    base = git.head_commit(repo)
    (seat.path / "src" / "key.py").write_text("KEY = 'hidden in history'\n")
    sh(seat.path, "add", "-A")
    sh(seat.path, "commit", "-qm", "the coder's own commit")
    smuggled = sh(seat.path, "rev-parse", "HEAD:src/key.py")
    (seat.path / "src" / "key.py").unlink()
    (seat.path / "src" / "a.py").write_text("a = 2\n")
    git.read_changes(seat.path, base)
    git.commit_all(seat.path, "assay: attempt 1, seat 1")
    candidate = seats.candidate_commit(seat, base, "Title\n\nbody")
    assert sh(seat.path, "rev-parse", f"{candidate}^@") == base
    assert sh(seat.path, "rev-parse", f"{candidate}^{{tree}}") == sh(
        seat.path, "rev-parse", "HEAD^{tree}"
    )
    seats.fetch_candidate(repo, seat, candidate)
    assert sh(repo, "show", f"{seat.branch}:src/a.py") == "a = 2"
    assert not has_object(repo, smuggled)  # the coder's history stayed in the seat


def test_secure_puts_back_config_hooks_and_alternates_and_drops_a_commondir(
    repo: Path, tmp_path: Path
) -> None:
    seat = make_seat(repo)
    config = (seat.git_dir / "config").read_bytes()
    sh(seat.path, "config", "core.fsmonitor", "touch /tmp/x")
    (seat.git_dir / "hooks" / "post-commit").write_text("#!/bin/sh\n")
    (seat.git_dir / "objects" / "info" / "alternates").write_text(f"{tmp_path}\n")
    (seat.git_dir / "commondir").write_text(f"{repo / '.git'}\n")
    (seat.git_dir / "info").mkdir()
    (seat.git_dir / "info" / "attributes").write_text("* -diff\n")
    seats.secure(seat)
    assert not (seat.git_dir / "info").exists()
    assert (seat.git_dir / "config").read_bytes() == config
    assert list((seat.git_dir / "hooks").iterdir()) == []
    assert (seat.git_dir / "objects" / "info" / "alternates").read_bytes() == seat.alternates
    assert not (seat.git_dir / "commondir").exists()
    assert git.head_commit(seat.path) == git.head_commit(repo)


def test_secure_writes_a_new_config_never_through_a_link(repo: Path, tmp_path: Path) -> None:
    seat = make_seat(repo)
    target = tmp_path / "elsewhere"
    target.write_text("keep me\n")
    (seat.git_dir / "config").unlink()
    (seat.git_dir / "config").symlink_to(target)
    with pytest.raises(seats.SeatTampered, match=r"\.git/config is a symbolic link"):
        seats.secure(seat)
    assert target.read_text() == "keep me\n"


@pytest.mark.parametrize("how", ["file", "symlink", "gone", "fifo", "inner-symlink"])
def test_a_replaced_git_is_tampering_and_is_not_followed(repo: Path, how: str) -> None:
    seat = make_seat(repo)
    before = user_state(repo)
    if how == "inner-symlink":
        seats.remove_tree(seat.git_dir / "refs")
        (seat.git_dir / "refs").symlink_to(repo / ".git" / "refs")
    elif how == "fifo":
        (seat.git_dir / "index").unlink()
        os.mkfifo(seat.git_dir / "index")
    else:
        seats.remove_tree(seat.git_dir)
        if how == "file":
            (seat.git_dir).write_text(f"gitdir: {repo / '.git'}\n")
        elif how == "symlink":
            (seat.git_dir).symlink_to(repo / ".git")
    with pytest.raises(seats.SeatTampered):
        seats.secure(seat)
    assert user_state(repo) == before


def test_secure_walks_a_git_dir_1100_folders_deep_and_finds_a_link_at_its_bottom(
    repo: Path, tmp_path: Path
) -> None:
    """Deeper than a recursive walk goes (os.walk raised RecursionError): looked through
    all the way down; a link at the bottom is found, one past PATH_MAX is not used."""
    seat = make_seat(repo)
    try:
        deep_tree(seat.git_dir / "hooks" / "deep", 1_100)
        deep_tree(seat.git_dir / "refs" / "deep", 1_100)
        seats.secure(seat)  # nothing a link or special: fine, and the hooks are put back
        assert list((seat.git_dir / "hooks").iterdir()) == []
        bottom = seat.git_dir / "refs" / "deep" / Path(*["d"] * 1_100)
        (bottom / "up").symlink_to(repo / ".git")
        with pytest.raises(seats.SeatTampered, match=r"d/d/up is a symbolic link"):
            seats.secure(seat)
        (bottom / "up").unlink()
        deep_tree(seat.git_dir / "logs" / "deeper", 2_500)  # 5,000 bytes: past PATH_MAX
        with pytest.raises(seats.SeatTampered, match="assay does not use it"):
            seats.secure(seat)
    finally:
        remove_deep(seat.path)


def test_fetch_brings_only_the_named_commit_with_the_seat_reset_first(
    repo: Path, tmp_path: Path
) -> None:
    seat = make_seat(repo)
    (seat.path / "src" / "a.py").write_text("a = 2\n")
    commit = git.commit_all(seat.path, "assay: attempt 1, seat 1")
    assert commit is not None
    marker = tmp_path / "ran"
    hook = f"#!/bin/sh\ntouch {marker}\n"
    sh(seat.path, "config", "uploadpack.packObjectsHook", f"touch {marker}")
    sh(seat.path, "config", "core.hooksPath", str(seat.git_dir / "hooks"))
    (seat.git_dir / "hooks" / "pre-upload").write_text(hook)
    config = (repo / ".git" / "config").read_bytes()
    assert seats.fetch_candidate(repo, seat, commit) == seat.branch
    assert sh(repo, "rev-parse", f"refs/heads/{seat.branch}") == commit
    assert sh(repo, "show", f"{seat.branch}:src/a.py") == "a = 2"
    assert (repo / ".git" / "config").read_bytes() == config
    assert not marker.exists()
    assert not (repo / ".git" / "FETCH_HEAD").exists()
    assert (seat.git_dir / "config").read_bytes() == seat.config  # reset before the fetch
    assert not (seat.git_dir / "hooks" / "pre-upload").exists()


def test_remove_seats_takes_the_repositories_and_homes_even_read_only(repo: Path) -> None:
    seat = make_seat(repo)
    locked = seat.home / "cache" / "pkg"
    locked.mkdir(parents=True)
    (locked / "f").write_text("x")
    locked.chmod(0o500)
    (seat.path / "outside").symlink_to(repo / "src")
    seats.remove_seats(repo / ".assay", "r1")
    assert not (repo / ".assay" / "seats").exists()
    assert (repo / "src" / "a.py").exists()  # a link is removed, never followed


def test_object_stores_lists_the_users_store_and_what_it_borrows(
    repo: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other.git"
    sh(tmp_path, "init", "-q", "--bare", str(other))
    (repo / ".git" / "objects" / "info" / "alternates").write_text(f"{other / 'objects'}\n")
    stores = seats.object_stores(repo)
    assert stores == ((repo / ".git" / "objects").resolve(), (other / "objects").resolve())
