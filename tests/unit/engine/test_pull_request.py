"""land_pull_request against a real repository, a bare remote and the recording API server."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.github_server import GitHubServer, Reply, rate_limited
from support.repo import git, make_repo

from assay.adapters.origin import failed_on_the_network as push_failed_on_the_network
from assay.core.contract import Contract
from assay.core.vocab import RunStatus
from assay.engine.effects import RunPlan
from assay.engine.local.pull_request import land_pull_request

TOKEN = "ghp_unit_token"
BRANCH = "assay/r1/seat-1"


@pytest.fixture
def github() -> Iterator[GitHubServer]:
    with GitHubServer(token=TOKEN) as server:
        yield server


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A repository with a candidate branch and a bare ``origin``."""
    repo = make_repo(tmp_path).root
    git(repo, "checkout", "-q", "-b", BRANCH)
    (repo / "src" / "slug.py").write_text("changed = True\n")
    git(repo, "commit", "-q", "-am", "candidate")
    git(repo, "checkout", "-q", "main")
    git(tmp_path, "init", "-q", "--bare", str(tmp_path / "origin.git"))
    git(repo, "remote", "add", "origin", str(tmp_path / "origin.git"))
    return repo


def plan(root: Path, base_branch: str | None = "main", **pr: Any) -> RunPlan:
    contract = Contract(task="Make slugify keep digits.\n\nMore words.", land="pr", pr=pr)  # type: ignore[arg-type]
    return RunPlan("t1", "r1", "r1", contract, root, "base", base_branch)


def env(github: GitHubServer, token: str = TOKEN) -> dict[str, str]:
    return {"GITHUB_TOKEN": token, "ASSAY_GITHUB_API": github.api_base}


def pushed(root: Path, branch: str = BRANCH) -> bool:
    origin = root.parent / "origin.git"
    return bool(git(origin, "branch", "--list", branch))


def test_the_pr_is_opened_with_rendered_templates_and_settings(
    root: Path, github: GitHubServer
) -> None:
    landing = land_pull_request(
        plan(
            root,
            repo="octo/slug",
            base="develop",
            draft=True,
            title="assay: {title} ({run_id})",
            body="{task}\n\n{branch} -> {base}, task {task_id}",
        ),
        BRANCH,
        env(github),
    )
    assert landing.warning is None
    outcome = landing.outcome
    assert outcome.status is RunStatus.READY and outcome.left_pr
    assert outcome.pr_url == "https://github.example/octo/slug/pull/1"
    assert outcome.detail.startswith("draft pull request #1 opened")
    (call,) = github.calls
    assert call.body == {
        "title": "assay: Make slugify keep digits. (r1)",
        "head": BRANCH,
        "base": "develop",
        "body": "Make slugify keep digits.\n\nMore words.\n\nassay/r1/seat-1 -> develop, task t1",
        "draft": True,
    }
    assert pushed(root)


def test_the_repository_is_read_from_the_remote_url(root: Path, github: GitHubServer) -> None:
    # Fetch URL on GitHub, pushes to the local bare repository.
    origin = root.parent / "origin.git"
    git(root, "remote", "set-url", "origin", "git@github.com:octo/from-url.git")
    git(root, "remote", "set-url", "--push", "origin", str(origin))
    landing = land_pull_request(plan(root), BRANCH, env(github))
    assert landing.warning is None, landing.warning
    assert github.calls[0].path == "/repos/octo/from-url/pulls"


def test_the_contract_api_base_wins_over_the_environment(root: Path, github: GitHubServer) -> None:
    environ = {"GITHUB_TOKEN": TOKEN, "ASSAY_GITHUB_API": "http://127.0.0.1:9/unused"}
    landing = land_pull_request(
        plan(root, repo="octo/slug", api_base=github.api_base + "/api/v3"), BRANCH, environ
    )
    assert landing.outcome.left_pr
    assert github.calls[0].path == "/api/v3/repos/octo/slug/pulls"


def test_a_rerun_finds_the_open_pull_request(root: Path, github: GitHubServer) -> None:
    github.add_pull("octo/slug", BRANCH)
    landing = land_pull_request(plan(root, repo="octo/slug"), BRANCH, env(github))
    assert landing.outcome.pr_url == "https://github.example/octo/slug/pull/1"
    assert [c.method for c in github.calls] == ["POST", "GET"]


def test_a_blocked_landing_is_a_draft_listing_the_failures(
    root: Path, github: GitHubServer
) -> None:
    failures = ["tests: FAILED test_digits\nE assert 'a' == 'b'\n```nested fence```", "lint: E501"]
    landing = land_pull_request(
        plan(root, repo="octo/slug"), BRANCH, env(github), blocked=True, failures=failures
    )
    outcome = landing.outcome
    assert outcome.status is RunStatus.BLOCKED and outcome.left_pr
    body = github.calls[0].body
    assert body["draft"] is True and body["title"] == "[blocked] Make slugify keep digits."
    text = body["body"]
    assert "- tests: FAILED test_digits\n  ````text\n  E assert 'a' == 'b'" in text
    assert "- lint: E501\n" in text
    assert text.index("Failures in the last attempt") < text.index("Make slugify keep digits.")


@pytest.mark.parametrize(
    ("settings", "base_branch", "token", "said"),
    [
        ({"repo": "octo/slug"}, "main", "", "GITHUB_TOKEN is not set"),
        ({"repo": "octo/slug"}, None, TOKEN, "set `pr.base`"),
        ({"repo": "octo/slug", "remote": "upstream"}, "main", TOKEN, "no remote named 'upstream'"),
        ({}, "main", TOKEN, "set `pr.repo: owner/name`"),
    ],
)
def test_settings_problems_push_nothing_and_say_what_to_fix(
    root: Path,
    github: GitHubServer,
    settings: dict[str, Any],
    base_branch: str | None,
    token: str,
    said: str,
) -> None:
    landing = land_pull_request(plan(root, base_branch, **settings), BRANCH, env(github, token))
    assert landing.warning is not None and said in landing.warning
    assert landing.warning.startswith("pull request not opened: ")
    outcome = landing.outcome
    # Never ready (Done): a setting a human must fix is a refusal, not a landing.
    assert outcome.status is RunStatus.BLOCKED and outcome.refused and not outcome.machine_fault
    assert not outcome.left_pr and outcome.pr_url is None
    assert outcome.branch == BRANCH and said in outcome.detail
    assert github.calls == [] and not pushed(root)


def test_a_remote_that_names_no_repository_is_shown_without_its_token(
    root: Path, github: GitHubServer
) -> None:
    git(root, "remote", "set-url", "origin", "https://x-access-token:ghs_secret@git.example/x")
    landing = land_pull_request(plan(root), BRANCH, env(github))
    assert landing.warning is not None and "cannot tell the GitHub repository" in landing.warning
    assert "https://***@git.example/x" in landing.warning and "ghs_secret" not in landing.warning


def test_a_failed_push_opens_no_pull_request(root: Path, github: GitHubServer) -> None:
    git(root, "remote", "set-url", "origin", str(root.parent / "missing.git"))
    landing = land_pull_request(plan(root, repo="octo/slug"), BRANCH, env(github))
    assert landing.warning is not None
    assert f"pushing {BRANCH} to origin failed" in landing.warning
    assert github.calls == [] and not landing.outcome.left_pr
    # A remote that is not a repository is the contract's problem: refused, for a human.
    assert landing.outcome.refused and landing.outcome.status is RunStatus.BLOCKED


def test_a_rate_limit_is_a_warning_with_the_reset_time(root: Path, github: GitHubServer) -> None:
    github.script(rate_limited(int(datetime(2030, 5, 6, 7, 8, tzinfo=UTC).timestamp())))
    landing = land_pull_request(plan(root, repo="octo/slug"), BRANCH, env(github))
    assert landing.warning is not None
    assert "rate limit" in landing.warning and "2030-05-06T07:08:00" in landing.warning
    assert f"branch {BRANCH} was pushed to origin" in landing.warning
    assert not landing.outcome.left_pr
    # A rate limit is the machine's: the run is refunded and the task lands again later, so
    # the pushed branch is deleted again (the next run pushes its own).
    assert landing.outcome.machine_fault and landing.outcome.status is RunStatus.FAILED
    assert not pushed(root) and "deleted from origin again" in landing.warning


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_server_error_is_a_machine_fault(root: Path, github: GitHubServer, status: int) -> None:
    github.script(Reply(status, {"message": "Server Error"}))
    landing = land_pull_request(plan(root, repo="octo/slug"), BRANCH, env(github))
    outcome = landing.outcome
    assert outcome.machine_fault and not outcome.refused
    assert outcome.status is RunStatus.FAILED and outcome.pr_url is None
    assert f"HTTP {status}" in outcome.detail
    assert not pushed(root)  # refunded: nothing of the run stays published


def test_an_unreachable_api_is_a_machine_fault(root: Path) -> None:
    unreachable = {"GITHUB_TOKEN": TOKEN, "ASSAY_GITHUB_API": "http://127.0.0.1:9"}
    landing = land_pull_request(plan(root, repo="octo/slug"), BRANCH, unreachable)
    assert landing.outcome.machine_fault and "cannot reach the GitHub API" in landing.outcome.detail


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (Reply(401, {"message": "Bad credentials"}), "HTTP 401: Bad credentials"),
        (Reply(403, {"message": "Resource not accessible"}), "HTTP 403"),
        (
            Reply(422, {"message": "Validation Failed", "errors": [{"message": "No commits"}]}),
            "HTTP 422: Validation Failed; No commits",
        ),
    ],
)
def test_a_refusal_is_held_with_the_apis_message(
    root: Path, github: GitHubServer, reply: Reply, said: str
) -> None:
    github.script(reply)
    outcome = land_pull_request(plan(root, repo="octo/slug"), BRANCH, env(github)).outcome
    assert outcome.refused and not outcome.machine_fault
    assert outcome.status is RunStatus.BLOCKED and said in outcome.detail
    assert pushed(root)  # held: the human who resolves it finds the branch


def test_each_step_is_recorded_as_it_takes_effect(root: Path, github: GitHubServer) -> None:
    steps: list[tuple[str, dict[str, object]]] = []
    landing = land_pull_request(
        plan(root, repo="octo/slug"),
        BRANCH,
        env(github),
        record=lambda kind, data: steps.append((kind, data)),
    )
    assert landing.outcome.left_pr
    assert steps == [
        ("land.pushed", {"branch": BRANCH, "remote": "origin", "blocked": False}),
        (
            "land.pr_opened",
            {"branch": BRANCH, "url": landing.outcome.pr_url, "number": 1, "blocked": False},
        ),
    ]


def test_a_failed_api_call_records_only_the_push(root: Path, github: GitHubServer) -> None:
    github.script(Reply(500, {"message": "Server Error"}))
    steps: list[str] = []
    land_pull_request(
        plan(root, repo="octo/slug"), BRANCH, env(github), record=lambda k, d: steps.append(k)
    )
    assert steps == ["land.pushed"]


def test_a_blocked_landing_that_fails_stays_blocked(root: Path, github: GitHubServer) -> None:
    github.script(Reply(503, {"message": "Server Error"}))
    landing = land_pull_request(plan(root, repo="octo/slug"), BRANCH, env(github), blocked=True)
    outcome = landing.outcome
    assert outcome.status is RunStatus.BLOCKED and not outcome.machine_fault
    assert not outcome.refused and not outcome.left_pr


@pytest.mark.parametrize(
    ("message", "network"),
    [
        (
            "fatal: unable to access 'https://github.com/o/r/': Could not resolve host: github.com",
            True,
        ),
        ("fatal: unable to access 'https://x/': Failed to connect: Connection refused", True),
        ("error: RPC failed; HTTP 503 curl 22 The requested URL returned error: 503", True),
        ("fatal: the remote end hung up unexpectedly", True),
        (
            "fatal: unable to access 'http://127.0.0.1:9/o.git/': Failed to connect to 127.0.0.1 "
            "port 9 after 0 ms: Couldn't connect to server",
            True,
        ),
        ("remote: Permission to o/r.git denied to bot.\nfatal: ... returned error: 403", False),
        ("fatal: '/x/missing.git' does not appear to be a git repository", False),
        ("! [remote rejected] b -> b (protected branch hook declined)", False),
    ],
)
def test_push_failures_on_the_network_are_faults(message: str, network: bool) -> None:
    assert push_failed_on_the_network(message) is network
