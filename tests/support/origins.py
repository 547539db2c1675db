"""A bare origin with ``main`` (one commit, ``a.txt``) and two clones of it: this machine and
another, for the tests of landing on a shared repository."""

from __future__ import annotations

from pathlib import Path

from assay.adapters.landing import SquashMessage
from support.repo import git


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
