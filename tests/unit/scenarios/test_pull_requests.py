"""`land: pr` through `assay run` (in-process): the remote is a local bare repository and the GitHub
API a local recording server, so the push and the API calls are real and checked."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from support.github_server import GitHubServer, Reply
from support.repo import FIXED, WRONG, Repo, git, make_repo_with_origin, replay_contract

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[3] / "schemas" / "payload.schema.json").read_text()
)
TOKEN = "ghp_e2e_secret_token_42"
PR_SETTINGS = "pr: {repo: octo/slug}\n"


@pytest.fixture
def github() -> Iterator[GitHubServer]:
    with GitHubServer(token=TOKEN) as server:
        yield server


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make_repo_with_origin(tmp_path)


def origin_has(repo: Repo, branch: str) -> bool:
    origin = repo.root.parent / "origin.git"
    found = subprocess.run(
        ["git", "-C", str(origin), "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
        capture_output=True,
        check=False,
    )
    return found.returncode == 0


def run_pr(
    repo: Repo, github: GitHubServer, *steps: str, token: str = TOKEN, extra: str = PR_SETTINGS
) -> subprocess.CompletedProcess[str]:
    contract = replay_contract(repo, *steps, land="pr", extra=extra)
    return repo.main(
        "run", "--contract", str(contract), ASSAY_GITHUB_API=github.api_base, GITHUB_TOKEN=token
    )


def only_payload(repo: Repo) -> dict[str, object]:
    (payload,) = repo.payloads()
    jsonschema.validate(payload, SCHEMA)
    return payload


def test_a_passing_run_pushes_the_branch_and_opens_the_pull_request(
    repo: Repo, github: GitHubServer
) -> None:
    done = run_pr(repo, github, "fixed")
    assert done.returncode == 0, done.stderr
    assert ": done (attempts: 1 of " in done.stdout and "row " not in done.stdout
    payload = only_payload(repo)
    assert payload["status"] == "ready" and payload["task_status"] == "done"
    branch = f"assay/{payload['run_id']}/seat-1"
    assert payload["land"] == {
        "mode": "pr",
        "branch": branch,
        "pr_url": "https://github.example/octo/slug/pull/1",
    }
    assert "pull request #1 opened: https://github.example/octo/slug/pull/1" in str(
        payload["reason"]
    )
    # The branch is on the remote, with the candidate's content.
    origin = repo.root.parent / "origin.git"
    assert git(origin, "show", f"{branch}:src/slug.py") + "\n" == FIXED
    (call,) = github.calls
    assert (call.method, call.path) == ("POST", "/repos/octo/slug/pulls")
    assert call.headers["authorization"] == f"Bearer {TOKEN}"
    assert call.body["head"] == branch and call.body["base"] == "main"
    assert call.body["title"] == "Make slugify keep digits." and call.body["draft"] is False
    assert f"run `{payload['run_id']}`" in call.body["body"]
    # The token is only ever in the Authorization header.
    assert TOKEN not in done.stdout + done.stderr
    assert not [p for p in (repo.root / ".assay").rglob("*") if p.is_file() and _holds(p, TOKEN)]


def test_a_blocked_run_leaves_a_draft_pr_and_the_task_is_held(
    repo: Repo, github: GitHubServer
) -> None:
    extra = PR_SETTINGS + "budgets: {max_attempts: 3, max_recovery: 2}\n"
    done = run_pr(repo, github, "wrong", extra=extra)
    assert done.returncode == 3, done.stderr
    assert ": held for a human" in done.stdout and "row " not in done.stdout
    payload = only_payload(repo)
    assert payload["status"] == "blocked" and payload["task_status"] == "held"
    assert payload["halt_type"] == "blocker" and payload["halts"]["fired"] == []
    assert str(payload["reason"]).startswith("stuck: attempt 2")
    assert str(payload["reason"]).endswith(
        "left for review as https://github.example/octo/slug/pull/1"
    )
    branch = f"assay/{payload['run_id']}/seat-1"
    assert payload["land"]["pr_url"] == "https://github.example/octo/slug/pull/1"
    origin = repo.root.parent / "origin.git"
    assert git(origin, "show", f"{branch}:src/slug.py") + "\n" == WRONG
    (call,) = github.posts()
    assert call.body["draft"] is True
    assert call.body["title"] == "[blocked] Make slugify keep digits."
    assert "Failures in the last attempt" in call.body["body"]
    assert "- tests:" in call.body["body"]
    assert github.pulls["octo/slug"][0]["draft"] is True


def test_a_rejected_token_holds_the_task_with_the_apis_message(
    repo: Repo, github: GitHubServer
) -> None:
    done = run_pr(repo, github, "fixed", token="ghp_not_the_right_one")
    assert done.returncode == 3, done.stderr
    assert ": held for a human (attempts: 1 of " in done.stdout and "row " not in done.stdout
    assert "Traceback" not in done.stderr
    warning = " ".join(done.stderr.split())
    assert "pull request not opened" in warning and "HTTP 401" in warning
    assert "GITHUB_TOKEN" in warning and "ghp_not_the_right_one" not in warning
    payload = only_payload(repo)
    # A pull request that was never opened is not Done: a human must fix the token.
    assert payload["status"] == "blocked" and payload["task_status"] == "held"
    assert payload["halt_type"] == "escalate"
    assert str(payload["reason"]).startswith(
        "the validators passed; the pull request was refused: "
    )
    assert "HTTP 401: Bad credentials" in str(payload["reason"])
    branch = f"assay/{payload['run_id']}/seat-1"
    assert payload["land"] == {"mode": "pr", "branch": branch, "pr_url": None}
    assert "pull request not opened" in str(payload["reason"])
    assert origin_has(repo, branch)  # pushed before the API refused
    assert git(repo.root, "branch", "--list", branch)  # and kept locally


def test_without_a_token_nothing_runs_and_nothing_is_pushed(
    repo: Repo, github: GitHubServer
) -> None:
    """A missing token is found before any coder runs (the preflight); the landing's own
    refusal, for a token gone by the time a run lands, is tests/engine/test_pull_request.py's."""
    done = run_pr(repo, github, "fixed", token="")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "assay: land: pr: GITHUB_TOKEN is not set; export a token that may push and open "
        "pull requests on the repository\n"
    )
    assert repo.payloads() == [] and github.calls == []
    assert not (repo.root / ".assay").exists()


def test_a_server_error_refunds_the_run_and_the_task_lands_again_later(
    repo: Repo, github: GitHubServer
) -> None:
    github.script(Reply(500, {"message": "Server Error"}))
    done = run_pr(repo, github, "fixed")
    assert done.returncode == 1, done.stderr
    assert "failed, runnable again (refunded, this run does not count; attempts: 0 of" in (
        done.stdout
    )
    first = only_payload(repo)
    assert first["status"] == "failed" and first["task_status"] == "failed"
    assert first["attempt_spent"] is False and first["halt_type"] == "environment_error"
    assert str(first["reason"]).startswith("the landing failed on a machine fault")
    assert "HTTP 500" in str(first["reason"])
    assert first["land"]["pr_url"] is None  # type: ignore[index]

    # The API is back: the next run of the same task opens the pull request and is done.
    task_id = str(first["task_id"])
    again = repo.main(
        "run",
        "--task",
        task_id,
        "--ignore-wait",
        "--json",
        ASSAY_GITHUB_API=github.api_base,
        GITHUB_TOKEN=TOKEN,
    )
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert second["status"] == "ready" and second["task_status"] == "done"
    assert second["land"]["pr_url"] == "https://github.example/octo/slug/pull/1"
    assert len(github.posts()) == 2


def _holds(path: Path, text: str) -> bool:
    try:
        return text in path.read_text(errors="replace")
    except OSError:
        return False
