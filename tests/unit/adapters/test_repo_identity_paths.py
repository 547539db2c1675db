"""A repository id made from a path (no network origin) holds the history's first commit: an
unrelated repository at the same path (another machine's ``/workspace/app``) is another
repository, and its worker never takes the first one's tasks."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

from support.repo import git

from assay.adapters.repo_identity import repository_id
from assay.core.tasks import Task

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _fresh_repo(path: Path, text: str) -> str:
    git(path.parent, "init", "-q", "-b", "main", str(path))
    (path / "README").write_text(text)
    git(path, "add", "README")
    git(path, "commit", "-qm", text)
    return git(path, "rev-list", "--max-parents=0", "HEAD")


def test_an_unrelated_repository_at_the_same_path_is_another_repository(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace" / "app"
    workspace.parent.mkdir()
    root_a = _fresh_repo(workspace, "project A")
    queued_on_a = Task.new(
        id="t1", title="t", instruction="delete the billing module", now=NOW,
        repository=repository_id(workspace), branch="main",
    )  # fmt: skip

    shutil.rmtree(workspace)  # machine B: its own, unrelated project at the same path
    root_b = _fresh_repo(workspace, "project B")
    assert root_a != root_b  # nothing in common

    here = repository_id(workspace)
    assert queued_on_a.belongs_elsewhere(here), (
        f"machine B's worker (id {here!r}) would run project A's task (id "
        f"{queued_on_a.repository!r})"
    )


def test_clones_of_two_local_bare_repositories_at_the_same_path_differ(tmp_path: Path) -> None:
    bare = tmp_path / "srv" / "app.git"
    bare.parent.mkdir()
    ids = []
    for project in ("A", "B"):  # machine A's /srv/app.git, then machine B's
        shutil.rmtree(bare, ignore_errors=True)
        seed = tmp_path / f"seed-{project}"
        _fresh_repo(seed, f"project {project}")
        git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
        clone = tmp_path / f"clone-{project}"
        git(tmp_path, "clone", "-q", str(bare), str(clone))
        ids.append(repository_id(clone))
    assert ids[0] != ids[1], f"both machines' clones are the repository {ids[0]!r}"
