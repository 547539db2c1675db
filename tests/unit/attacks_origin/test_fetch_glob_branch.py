"""Attack (robustness of ``fetch_branch``): a task whose branch is a refspec pattern (``*``,
``ma*n``; git refuses such a branch name, but ``tasks.branch`` is a plain column of a shared
ledger). The fetch refspec ``+refs/heads/ma*n:refs/remotes/origin/ma*n`` is a glob: git
force-updates every matching tracking ref and succeeds; the ``rev-parse`` of the pattern then
fails, and ``fetch_branch`` returns its empty output as the commit instead of raising. The run
would then start from the commit ``""``. Pushes of such a name are refused by git (held).
"""

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
    try:
        got = origin.fetch_branch(here, "origin", branch)
    except origin.OriginError:
        return
    assert len(got) == 40, f"fetch_branch({branch!r}) returned {got!r} as the origin's commit"
