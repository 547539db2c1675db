"""Shared repositories for the tests of landing on an origin: a bare origin and two clones of
it (this machine and another), and commits pushed there by "another machine"."""

from __future__ import annotations

from pathlib import Path

from assay.adapters.landing import SquashMessage
from support.repo import Repo, git, make_repo_with_origin


def bare_and_clones(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(the bare origin, this machine's clone, another machine's clone)."""
    bare, seed = tmp_path / "origin.git", tmp_path / "seed"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(tmp_path, "init", "-q", "-b", "main", str(seed))
    (seed / "a.txt").write_text("a\n")
    git(seed, "add", "a.txt")
    git(seed, "commit", "-qm", "base")
    git(seed, "push", "-q", str(bare), "main")
    here, there = tmp_path / "here", tmp_path / "there"
    for clone in (here, there):
        git(tmp_path, "clone", "-q", str(bare), str(clone))
    return bare, here, there


def squash_message(run_id: str = "r1") -> SquashMessage:
    return SquashMessage(
        task="Add b", task_id="t1", run_id=run_id, attempts=1, blocked=0, coder="c", seat=1
    )


def user_and_clones(tmp_path: Path) -> tuple[Repo, Path, Path]:
    """The user's repository (:func:`make_repo_with_origin`, its bare origin at
    ``tmp_path/origin.git``), a worker's clone of that origin and another machine's."""
    made = make_repo_with_origin(tmp_path)
    bare = tmp_path / "origin.git"
    worker, other = tmp_path / "worker", tmp_path / "other"
    git(bare, "symbolic-ref", "HEAD", "refs/heads/main")
    for clone in (worker, other):
        git(tmp_path, "clone", "-q", str(bare), str(clone))
        git(clone, "config", "user.email", "m@example.com")
        git(clone, "config", "user.name", "m")
    return made, worker, other


def commit_file(clone: Path, name: str, text: str, push: bool = False) -> str:
    """Commit ``name`` holding ``text`` in ``clone`` (and push it to the origin's main); the
    commit."""
    (clone / name).write_text(text)
    git(clone, "add", name)
    git(clone, "commit", "-qm", f"write {name}")
    if push:
        git(clone, "push", "-q", "origin", "HEAD:main")
    return git(clone, "rev-parse", "HEAD")
