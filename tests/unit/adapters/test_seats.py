"""Seat repositories against real temporary repositories: a clone of the base commit that
borrows the user's objects, checked and reset after the coder, fetched back only on request."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.repo import dirty
from support.repo import git as sh

from assay.adapters import git, seats

pytestmark = pytest.mark.usefixtures("isolated_git")


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


def test_a_seat_s_branch_is_written_as_git_writes_it_and_git_reads_it_back(repo: Path) -> None:
    """The seat's branch is a loose ref written without a git process: git agrees it is a
    valid branch at the base, and a coder's commit on it moves it as usual."""
    seat = make_seat(repo, "run-7", 1)
    ref = "refs/heads/assay/run-7/seat-1"
    assert sh(seat.path, "show-ref", "--verify", ref).split() == [git.head_commit(repo), ref]
    assert sh(seat.path, "fsck", "--no-dangling", "--connectivity-only") == ""
    assert not (seat.git_dir / "logs").exists()  # no reflog folders to make and remove
    (seat.path / "src" / "b.py").write_text("b = 2\n")
    sh(seat.path, "add", "-A")
    sh(seat.path, "commit", "-q", "-m", "coder")
    assert git.head_commit(seat.path) != git.head_commit(repo)
    assert sh(seat.path, "rev-parse", ref) == git.head_commit(seat.path)


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
    assert not dirty(seat.path) and not dirty(repo)
    # The user's repository knows nothing of the seat: no branch, no worktree, same config.
    assert user_state(repo) == before
    assert sh(repo, "worktree", "list").count("\n") == 0


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
