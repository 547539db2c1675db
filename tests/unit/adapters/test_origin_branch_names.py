"""A task's branch that is no branch name (a refspec pattern such as ``*``; ``tasks.branch``
is a plain column of a shared ledger) is refused before anything is fetched, never taken as
an empty base commit."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.repo import git

from assay.adapters import origin


@pytest.mark.parametrize("branch", ["*", "ma*n"])
def test_a_pattern_branch_is_an_error_not_an_empty_commit(tmp_path: Path, branch: str) -> None:
    bare, here = tmp_path / "origin.git", tmp_path / "here"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(tmp_path, "clone", "-q", str(bare), str(here))
    (here / "a.txt").write_text("a\n")
    git(here, "add", "a.txt")
    git(here, "commit", "-qm", "base")
    git(here, "push", "-q", "origin", "main")
    with pytest.raises(origin.OriginError, match="is not a branch name: nothing to fetch"):
        got = origin.fetch_branch(here, "origin", branch)
        assert len(got) == 40, f"fetch_branch({branch!r}) returned {got!r} as the origin's commit"
