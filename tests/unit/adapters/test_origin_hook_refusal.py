"""A pre-receive hook that refuses a push is an error naming its words, never read as a lost
race (retried) because its message mentions git's race words: only the pushed ref's own
porcelain status line says the branch moved."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest
from support.repo import git

from assay.adapters import origin
from assay.adapters.landing import SquashMessage


def _message() -> SquashMessage:
    return SquashMessage(
        task="Add b", task_id="t1", run_id="r1", attempts=1, blocked=0, coder="c", seat=1
    )


def _setup(tmp_path: Path, hook_says: str) -> tuple[Path, Path, str, Path]:
    bare, here = tmp_path / "origin.git", tmp_path / "here"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(tmp_path, "clone", "-q", str(bare), str(here))
    (here / "a.txt").write_text("a\n")
    git(here, "add", "a.txt")
    git(here, "commit", "-qm", "base")
    git(here, "push", "-q", "origin", "main")
    base = origin.fetch_branch(here, "origin", "main")
    git(here, "checkout", "-q", "-b", "cand")
    (here / "b.txt").write_text("b\n")
    git(here, "add", "b.txt")
    git(here, "commit", "-qm", "b")
    counter = tmp_path / "pushes"
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\necho x >> {counter}\necho '{hook_says}' >&2\nexit 1\n")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    return here, bare, base, counter


def test_a_plain_hook_refusal_is_an_origin_error_tried_once(tmp_path: Path) -> None:
    here, _bare, base, counter = _setup(tmp_path, "policy: no pushes on Fridays")
    with pytest.raises(origin.OriginError, match="no pushes on Fridays"):
        origin.push_squash(
            here, remote="origin", branch="cand", into_branch="main", base_commit=base,
            message=_message(),
        )  # fmt: skip
    assert counter.read_text().count("x") == 1


def test_a_hook_refusal_that_mentions_fetch_first_is_not_a_lost_race(tmp_path: Path) -> None:
    here, _bare, base, counter = _setup(
        tmp_path, "policy: signed commits only; see the wiki, fetch first the key list"
    )
    with pytest.raises(origin.OriginError, match="signed commits only"):
        origin.push_squash(
            here, remote="origin", branch="cand", into_branch="main", base_commit=base,
            message=_message(),
        )  # fmt: skip
    assert counter.read_text().count("x") == 1  # one refusal, not 8 pushes


@pytest.mark.parametrize(
    ("status", "race"),
    [
        ("[rejected] (stale info)", True),
        ("[rejected] (fetch first)", True),
        # Two pushes at once: the receiving side's compare under its ref lock fails.
        ("[remote rejected] (failed to update ref)", True),
        ("[remote rejected] (cannot lock ref 'refs/heads/main': is at 1a but expected 2b)", True),
        ("[remote rejected] (failed to lock)", True),
        ("[remote rejected] (pre-receive hook declined)", False),
        ("[remote rejected] (protected branch hook declined)", False),
    ],
)
def test_only_the_refs_own_status_says_the_branch_moved(status: str, race: bool) -> None:
    pushed = subprocess.CompletedProcess(
        ["git", "push"],
        1,
        f"To /x/origin.git\n!\tabc:refs/heads/main\t{status}\nDone\n".encode(),
        b"remote: the words of a hook: fetch first, cannot lock ref, failed to update ref\n",
    )
    assert origin._lost_race(pushed) is race
