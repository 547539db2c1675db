"""Recovering a `land: pr` run from its journal: a pull request it opened closes it as landed.

Real SQLite ledger, a real repository with a bare ``origin``, and the recording GitHub
stand-in: what the journal says (``land.pushed``, ``land.pr_opened``) and, after a push with no
recorded pull request, what the API lists for the branch decide the close.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.github_server import GitHubServer, Reply
from support.recovery import START, running_ledger

from assay.adapters.store.records import Event
from assay.adapters.store.sql import Ledger
from assay.core.contract import Contract
from assay.core.vocab import RunStatus, TaskStatus
from assay.engine.local.journal import read_journal
from assay.engine.recovery.close import close_unfinished

TOKEN = "ghp_recover"
BRANCH = "assay/r1/seat-1"
CONTRACT = Contract(task="i", land="pr", pr={"repo": "octo/slug"})  # type: ignore[arg-type]


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def github() -> Iterator[GitHubServer]:
    with GitHubServer(token=TOKEN) as server:
        yield server


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository whose run branch was pushed to its bare ``origin``."""
    root, origin = tmp_path / "repo", tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "-b", "main", str(root))
    git(tmp_path, "init", "-q", "--bare", str(origin))
    (root / "a.txt").write_text("a\n")
    git(root, "add", "a.txt")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    git(root, "branch", BRANCH)
    git(root, "remote", "add", "origin", str(origin))
    git(root, "push", "-q", "origin", "main", BRANCH)
    return root


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return running_ledger(tmp_path)


def journal(ledger: Ledger, *entries: tuple[str, dict[str, Any]]) -> None:
    base = [
        ("dispatch.started", {"attempt": 1, "seat": 1, "coder": "command"}),
        ("seat.finished", {"attempt": 1, "seat": 1, "files": ["a.txt"], "viable": True}),
    ]
    for kind, data in [*base, *entries]:
        ledger.append_event(kind, data, at=START, task_id="t1", run_id="r1")


def recover(repo: Path, ledger: Ledger, github: GitHubServer) -> RunStatus:
    return close_unfinished(
        repo=repo,
        home=repo / ".assay",
        ledger=ledger,
        record=ledger.get_run("r1"),
        contract=CONTRACT,
        reason="interrupted: the process running it died before the run closed",
        clock=lambda: START,
        env={"GITHUB_TOKEN": TOKEN, "ASSAY_GITHUB_API": github.api_base},
    )


def payload(repo: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((repo / ".assay/runs/r1/payload.json").read_text())
    return loaded


def on_origin(repo: Path) -> bool:
    origin = repo.parent / "origin.git"
    found = subprocess.run(
        ["git", "-C", str(origin), "rev-parse", "--verify", "--quiet", f"refs/heads/{BRANCH}"],
        capture_output=True,
        check=False,
    )
    return found.returncode == 0


PUSHED = ("land.pushed", {"branch": BRANCH, "remote": "origin", "blocked": False})


def opened(url: str, *, blocked: bool = False) -> tuple[str, dict[str, Any]]:
    return ("land.pr_opened", {"branch": BRANCH, "url": url, "number": 7, "blocked": blocked})


def test_the_journal_reads_the_landing_back() -> None:
    events = [
        Event(id=1, at=START, kind=PUSHED[0], data=PUSHED[1]),
        Event(id=2, at=START, kind="land.pr_opened", data=opened("https://x/pull/7")[1]),
    ]
    landing = read_journal(events, dispatch_id="r1", fault="f").landing
    assert landing is not None
    assert (landing.branch, landing.remote, landing.pr_url) == (
        BRANCH,
        "origin",
        "https://x/pull/7",
    )
    assert read_journal(events[:1], dispatch_id="r1", fault="f").landing.pr_url is None  # type: ignore[union-attr]


def test_a_recorded_pull_request_closes_the_run_as_landed_without_asking_the_api(
    repo: Path, ledger: Ledger, github: GitHubServer
) -> None:
    journal(ledger, PUSHED, opened("https://github.example/octo/slug/pull/7"))
    assert recover(repo, ledger, github) is RunStatus.READY
    assert github.calls == []
    assert ledger.get_task("t1").status is TaskStatus.DONE
    shown = payload(repo)
    assert shown["status"] == "ready" and shown["task_status"] == "done"
    assert shown["land"] == {
        "mode": "pr",
        "branch": BRANCH,
        "pr_url": "https://github.example/octo/slug/pull/7",
    }
    assert git(repo, "branch", "--list", BRANCH)  # the pull request's branch is kept
    assert on_origin(repo)


def test_a_recorded_draft_of_a_blocked_run_holds_the_task(
    repo: Path, ledger: Ledger, github: GitHubServer
) -> None:
    journal(ledger, PUSHED, opened("https://github.example/octo/slug/pull/7", blocked=True))
    assert recover(repo, ledger, github) is RunStatus.BLOCKED
    task = ledger.get_task("t1")
    assert task.status is TaskStatus.HELD and task.attempts == 1
    assert payload(repo)["halt_type"] == "blocker"


def test_a_push_whose_pull_request_is_open_on_github_closes_as_landed(
    repo: Path, ledger: Ledger, github: GitHubServer
) -> None:
    pull = github.add_pull("octo/slug", BRANCH)
    journal(ledger, PUSHED)
    assert recover(repo, ledger, github) is RunStatus.READY
    (call,) = github.calls
    assert (call.method, call.query["head"]) == ("GET", [f"octo:{BRANCH}"])
    assert payload(repo)["land"]["pr_url"] == pull["html_url"]
    assert github.posts() == []


def test_a_push_without_a_pull_request_is_refunded_and_its_branch_deleted(
    repo: Path, ledger: Ledger, github: GitHubServer
) -> None:
    journal(ledger, PUSHED)
    assert recover(repo, ledger, github) is RunStatus.FAILED
    task = ledger.get_task("t1")
    assert task.status is TaskStatus.FAILED and task.attempts == 0  # refunded
    assert not on_origin(repo)
    assert payload(repo)["land"] is None


def test_when_the_api_cannot_tell_the_run_is_refunded_and_the_branch_stays(
    repo: Path, ledger: Ledger, github: GitHubServer
) -> None:
    github.script(Reply(502, {"message": "Bad gateway"}))
    journal(ledger, PUSHED)
    assert recover(repo, ledger, github) is RunStatus.FAILED
    assert on_origin(repo)  # maybe its pull request is open: a human can see it
