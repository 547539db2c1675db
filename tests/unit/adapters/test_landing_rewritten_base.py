"""A landing never undoes a rewrite of its base branch (force-pushed back, or reset, to take
out a commit that leaked a secret) while the run was between its start and its landing: the
run is blocked and nothing lands, on an origin and locally."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from support.fixed_run import run_fixed
from support.origins import bare_and_clones, commit_file, squash_message, user_and_clones
from support.repo import Repo, git

from assay.adapters import origin
from assay.adapters.landing import LandBlocked, LandRefused
from assay.core.vocab import RunStatus


@pytest.fixture
def clones(tmp_path: Path) -> tuple[Path, Path, Path]:
    return bare_and_clones(tmp_path)


def test_a_force_push_that_removed_a_commit_is_not_undone_by_the_landing(
    clones: tuple[Path, Path, Path],
) -> None:
    bare, here, there = clones
    good = git(there, "rev-parse", "HEAD")
    # The other machine pushes a commit that leaks a secret; the run starts from it.
    commit_file(there, "SECRET.env", "TOKEN=hunter2\n", push=True)
    base = origin.fetch_branch(here, "origin", "main")
    git(here, "checkout", "-q", "-b", "cand", base)
    (here / "b.txt").write_text("b\n")
    git(here, "add", "b.txt")
    git(here, "commit", "-qm", "change")
    validated = {git(here, "rev-parse", "cand^{tree}")}
    # Meanwhile the other machine takes the leak out again: a force-push back to ``good``.
    git(there, "reset", "-q", "--hard", good)
    git(there, "push", "-q", "--force", "origin", "main")

    revalidated: list[str] = []
    with contextlib.suppress(LandBlocked, LandRefused):  # refusing is a fine answer
        origin.push_squash(
            here, remote="origin", branch="cand", into_branch="main", base_commit=base,
            message=squash_message(), validated=validated,
            revalidate=lambda combined, tip: revalidated.append(tip) or None,
        )  # fmt: skip
    files = git(bare, "ls-tree", "-r", "--name-only", "main").split()
    # The landing must only add the run's change (b.txt) to what the origin holds now.
    assert "SECRET.env" not in files, (
        "the landing resurrected a file the other machine's force-push had removed "
        f"(revalidated on: {revalidated})"
    )


@pytest.fixture
def machines(tmp_path: Path) -> tuple[Repo, Path, Path]:
    return user_and_clones(tmp_path)


def test_a_run_does_not_put_back_what_a_force_push_took_off_the_origin(
    machines: tuple[Repo, Path, Path],
) -> None:
    made, worker, other = machines
    good = git(other, "rev-parse", "HEAD")
    commit_file(other, "SECRET.env", "TOKEN=hunter2\n", push=True)
    marker = worker.parent / "rewritten"
    # The validator's first run (on the candidate) is when the other machine rewrites the
    # origin's main back to before the leak; it passes every time.
    check = (
        f"if [ ! -e {marker} ]; then touch {marker}; cd {other} && git reset -q --hard {good} "
        f"&& git push -q --force origin main; fi; exit 0"
    )
    report = run_fixed(made, check, land="merge", root=worker, origin="origin")

    tip = git(other, "ls-remote", "origin", "refs/heads/main").split()[0]
    git(other, "fetch", "-q", "origin")
    files = git(other, "ls-tree", "-r", "--name-only", tip).split()
    assert "SECRET.env" not in files, (
        f"run {report.payload.status.value}: {report.payload.reason}; the origin's main holds "
        "SECRET.env again, which the other machine's force-push had removed"
    )
    assert report.payload.status is not RunStatus.MERGED or "src/slug.py" in files


def test_the_local_landing_does_not_undo_a_reset_of_the_base_branch(tmp_path: Path) -> None:
    """The same combine, without an origin: the base branch reset back (``git reset --hard
    HEAD~``, a bad commit taken out) during the run gets the removed commit's content back."""
    from assay.adapters.landing import land_squash

    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-qm", "a")
    good = git(repo, "rev-parse", "HEAD")
    (repo / "SECRET.env").write_text("TOKEN=hunter2\n")
    git(repo, "add", "SECRET.env")
    git(repo, "commit", "-qm", "oops")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "branch", "cand", base)
    git(repo, "worktree", "add", "-q", str(tmp_path / "seat"), "cand")
    (tmp_path / "seat" / "b.txt").write_text("b\n")
    git(tmp_path / "seat", "add", "b.txt")
    git(tmp_path / "seat", "commit", "-qm", "change")
    validated = {git(repo, "rev-parse", "cand^{tree}")}
    git(repo, "reset", "-q", "--hard", good)  # the user takes the leak out
    with contextlib.suppress(LandBlocked, LandRefused):
        land_squash(
            repo, branch="cand", into_branch="main", base_commit=base, message=squash_message(),
            validated=validated, revalidate=lambda combined, tip: None,
        )  # fmt: skip
    files = git(repo, "ls-tree", "-r", "--name-only", "main").split()
    assert "SECRET.env" not in files, "the landing put back what the reset took out"
