"""A task records the repository it was queued in and the branch it targets; a command that
would run it in another repository refuses (exit 2, nothing changed), and `serve` there leaves
it alone."""

from __future__ import annotations

import json
from pathlib import Path

from support.repo import Repo, git, make_repo

from tests.unit.cli.test_bad_input import COMMAND_CODER, one_line
from tests.unit.cli.test_json_schema import valid


def _added(repo: Repo) -> dict[str, object]:
    added = repo.main("task", "add", "fix it", *COMMAND_CODER, "--json")
    assert added.returncode == 0, added.stderr
    document: dict[str, object] = json.loads(added.stdout)
    return document


def _shown(repo: Repo, task_id: object) -> dict[str, object]:
    shown = repo.main("task", "show", str(task_id), "--json")
    assert shown.returncode == 0, shown.stderr
    document: dict[str, object] = json.loads(shown.stdout)
    return document


def test_a_task_records_its_repository_and_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    root = git(repo.root, "rev-list", "--max-parents=0", "HEAD")
    here = f"{repo.root.resolve()}#{root[:12]}"  # no origin: its path and its first commit
    task = _added(repo)
    assert (task["repository"], task["branch"]) == (here, "main")
    shown = _shown(repo, task["id"])
    assert (shown["repository"], shown["branch"]) == (here, "main")
    valid("task_add", task)
    valid("task_show", shown)
    listed = json.loads(repo.main("task", "list", "--json").stdout)
    valid("task_list", listed)
    assert [(t["repository"], t["branch"]) for t in listed] == [(here, "main")]
    text = repo.main("task", "show", str(task["id"])).stdout
    assert f"repository: {here}  branch: main" in text


def test_another_repository_s_task_is_refused_by_id_and_left_alone_by_serve(
    tmp_path: Path,
) -> None:
    """Two clones that share the ledger are told apart by their ids (here the override):
    the other one's `run --task` refuses, naming both, and its `serve` never touches it."""
    repo = make_repo(tmp_path)
    git(repo.root, "config", "assay.repository", "github.com/team/project")
    task = _added(repo)
    assert task["repository"] == "github.com/team/project"
    git(repo.root, "config", "assay.repository", "github.com/team/unrelated")

    ran = repo.main("run", "--task", str(task["id"]))
    assert ran.returncode == 2, ran.stderr
    line = one_line(ran.stderr)
    assert "github.com/team/project" in line and "github.com/team/unrelated" in line, line
    served = repo.main("serve", "--once", "--poll", "0.1")
    assert served.returncode == 0, served.stderr
    assert "served 0 run(s)" in served.stderr, served.stderr
    after = _shown(repo, task["id"])
    assert (after["status"], after["attempts"], after["runs"]) == ("queued", 0, [])

    git(repo.root, "config", "assay.repository", "github.com/team/project")  # its own clone
    served = repo.main("serve", "--once", "--poll", "0.1")
    assert "served 0 run(s)" not in served.stderr, served.stderr
    assert _shown(repo, task["id"])["runs"]  # its own repository's serve ran it
