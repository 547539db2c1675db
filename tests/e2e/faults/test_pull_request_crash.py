"""`land: pr` killed around its landing, then resumed: the pull request is opened exactly once.

The real `assay run` is ended at a boundary (``ASSAY_CRASH_AT``) against a local bare
``origin`` and the recording GitHub stand-in. ``ref_moved`` is, for a pull request, the moment
it is open on GitHub and not yet in the journal: recovery must ask the API. ``payload_written``
comes after ``land.pr_opened`` is journaled. Either way `assay run --resume` closes the run as
landed and never opens a second pull request.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.github_server import GitHubServer
from support.repo import Repo, git, make_repo_with_origin, replay_contract

from assay.engine.crashpoints import CRASH_EXIT

TOKEN = "ghp_crash_token"
PULL = "https://github.example/octo/slug/pull/1"


@pytest.fixture
def github() -> Iterator[GitHubServer]:
    with GitHubServer(token=TOKEN) as server:
        yield server


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make_repo_with_origin(tmp_path)


def assay(
    repo: Repo, github: GitHubServer, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    return repo.assay(*args, ASSAY_GITHUB_API=github.api_base, GITHUB_TOKEN=TOKEN, **env)


def main(
    repo: Repo, github: GitHubServer, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """:func:`assay` in this process: the recovery and the reads need no process of their own."""
    return repo.main(*args, ASSAY_GITHUB_API=github.api_base, GITHUB_TOKEN=TOKEN, **env)


def origin_branches(repo: Repo) -> list[str]:
    origin = repo.root.parent / "origin.git"
    listed = git(origin, "for-each-ref", "--format=%(refname:short)", "refs/heads/assay/")
    return [line for line in listed.splitlines() if line]


@pytest.mark.parametrize("crash_at", ["landing_intent", "ref_moved", "payload_written"])
def test_a_pr_run_killed_around_its_landing_opens_one_pull_request(
    repo: Repo, github: GitHubServer, crash_at: str
) -> None:
    contract = replay_contract(repo, "fixed", land="pr", extra="pr: {repo: octo/slug}\n")
    killed = assay(repo, github, "run", "--contract", str(contract), ASSAY_CRASH_AT=crash_at)
    assert killed.returncode == CRASH_EXIT, killed.stderr

    resumed = main(repo, github, "run", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert len(github.posts()) == 1
    assert [p["number"] for p in github.pulls["octo/slug"]] == [1]
    payloads = repo.payloads()
    landed = [p for p in payloads if p["status"] == "ready"]
    assert len(landed) == 1 and landed[0]["land"]["pr_url"] == PULL
    assert landed[0]["task_status"] == "done"
    # The one branch on origin is the pull request's.
    assert origin_branches(repo) == [landed[0]["land"]["branch"]]
    shown = json.loads(main(repo, github, "task", "list", "--json").stdout)
    assert [t["status"] for t in shown] == ["done"]


def test_a_blocked_pr_run_killed_after_opening_its_draft_is_held_with_one_draft(
    repo: Repo, github: GitHubServer
) -> None:
    extra = "pr: {repo: octo/slug}\nbudgets: {max_attempts: 3, max_recovery: 1}\n"
    contract = replay_contract(repo, "wrong", land="pr", extra=extra)
    killed = assay(repo, github, "run", "--contract", str(contract), ASSAY_CRASH_AT="ref_moved")
    assert killed.returncode == CRASH_EXIT, killed.stderr

    resumed = main(repo, github, "run", "--resume")
    assert resumed.returncode == 3, resumed.stderr  # held for the human reviewing the draft
    assert len(github.posts()) == 1 and github.pulls["octo/slug"][0]["draft"] is True
    (payload,) = repo.payloads()
    assert payload["status"] == "blocked" and payload["task_status"] == "held"
    assert payload["land"]["pr_url"] == PULL
