"""The GitHub client against a recording stand-in server: real sockets, real status codes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from support.github_server import (
    BAD_CREDENTIALS,
    GitHubServer,
    Reply,
    rate_limited,
    secondary_limit,
)

from assay.adapters import github
from assay.adapters.github import (
    GitHubAuthError,
    GitHubError,
    GitHubNotFoundError,
    GitHubQuotaError,
    PullRequest,
    open_pull_request,
    repo_from_remote_url,
)

TOKEN = "ghp_test_token_value_123"


@pytest.fixture
def server() -> Iterator[GitHubServer]:
    with GitHubServer(token=TOKEN) as running:
        yield running


def open_pr(server: GitHubServer, **overrides: object) -> PullRequest:
    args: dict[str, object] = {
        "api_base": server.api_base,
        "repo": "octo/slug",
        "token": TOKEN,
        "head": "assay/r1/seat-1",
        "base": "main",
        "title": "Make slugify keep digits.",
        "body": "the body",
        "draft": False,
    }
    args.update(overrides)
    return open_pull_request(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "repo"),
    [
        ("https://github.com/octo/slug.git", "octo/slug"),
        ("https://github.com/octo/slug", "octo/slug"),
        ("https://github.com/octo/slug/", "octo/slug"),
        ("https://user:secret@github.com/octo/slug.git", "octo/slug"),
        ("git@github.com:octo/slug.git", "octo/slug"),
        ("git@github.com:octo/slug", "octo/slug"),
        ("github.com:octo/slug.git", "octo/slug"),
        ("ssh://git@github.com/octo/slug.git", "octo/slug"),
        ("ssh://git@github.com:2222/octo/slug", "octo/slug"),
        ("git://github.com/octo/slug.git", "octo/slug"),
        ("https://ghe.example.com/octo/my.repo.git", "octo/my.repo"),
        ("/tmp/remotes/origin.git", None),
        ("../origin.git", None),
        ("origin.git", None),
        ("file:///tmp/remotes/origin.git", None),
        ("https://github.com/octo", None),
        ("", None),
    ],
)
def test_owner_and_name_from_a_remote_url(url: str, repo: str | None) -> None:
    assert repo_from_remote_url(url) == repo


def test_opening_posts_the_pull_request_with_the_api_headers(server: GitHubServer) -> None:
    pull = open_pr(server, draft=True)
    assert pull.number == 1
    assert pull.html_url == "https://github.example/octo/slug/pull/1"
    assert pull.url == f"{server.api_base}/repos/octo/slug/pulls/1"
    (call,) = server.calls
    assert (call.method, call.path) == ("POST", "/repos/octo/slug/pulls")
    assert call.headers["authorization"] == f"Bearer {TOKEN}"
    assert call.headers["accept"] == "application/vnd.github+json"
    assert call.headers["x-github-api-version"] == "2022-11-28"
    assert call.body == {
        "title": "Make slugify keep digits.",
        "head": "assay/r1/seat-1",
        "base": "main",
        "body": "the body",
        "draft": True,
    }
    assert TOKEN not in str(call.body)


def test_an_existing_pull_request_for_the_head_is_found_and_returned(
    server: GitHubServer,
) -> None:
    earlier = server.add_pull("octo/slug", "assay/r1/seat-1")
    pull = open_pr(server)
    assert pull.number == earlier["number"]
    post, get = server.calls
    assert post.method == "POST" and get.method == "GET"
    assert get.path == "/repos/octo/slug/pulls"
    assert get.query == {"head": ["octo:assay/r1/seat-1"], "state": ["open"]}
    assert get.headers["authorization"] == f"Bearer {TOKEN}"


def test_already_exists_but_none_open_is_a_clear_error(server: GitHubServer) -> None:
    server.script(
        Reply(422, {"message": "Validation Failed", "errors": [{"message": "A pull request "
              "already exists for octo:assay/r1/seat-1."}]}),
        Reply(200, []),
    )  # fmt: skip
    with pytest.raises(GitHubError, match="none is open"):
        open_pr(server)


def test_another_validation_failure_is_reported_with_githubs_words(server: GitHubServer) -> None:
    server.script(Reply(422, {"message": "Validation Failed", "errors": [{"code": "invalid"}]}))
    with pytest.raises(GitHubError, match=r"HTTP 422: Validation Failed; invalid"):
        open_pr(server)


def test_a_rejected_token_names_the_fix_and_never_the_token(server: GitHubServer) -> None:
    with pytest.raises(GitHubAuthError) as caught:
        open_pr(server, token="ghp_wrong_token_value")
    message = str(caught.value)
    assert "401" in message and "GITHUB_TOKEN" in message and "Bad credentials" in message
    assert "ghp_wrong_token_value" not in message
    assert caught.value.status == 401


def test_a_forbidden_answer_names_the_scopes(server: GitHubServer) -> None:
    server.script(Reply(403, {"message": "Resource not accessible by integration"}))
    with pytest.raises(GitHubAuthError, match=r"403.*`repo` scope.*Pull requests: write"):
        open_pr(server)


def test_not_found_names_the_repo_setting(server: GitHubServer) -> None:
    with pytest.raises(GitHubNotFoundError, match=r"octo/nope.*`pr.repo`.*ASSAY_GITHUB_API"):
        open_pr(server, repo="octo/nope", api_base=server.api_base + "/elsewhere")


def test_the_primary_rate_limit_is_a_quota_error_with_the_reset_time(
    server: GitHubServer,
) -> None:
    reset = int(datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp())
    server.script(rate_limited(reset))
    with pytest.raises(GitHubQuotaError) as caught:
        open_pr(server)
    assert caught.value.reset_at == datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert "rate limit" in str(caught.value) and "2030-01-02T03:04:05" in str(caught.value)


def test_a_secondary_rate_limit_uses_retry_after(server: GitHubServer) -> None:
    server.script(secondary_limit(120))
    before = datetime.now(UTC)
    with pytest.raises(GitHubQuotaError) as caught:
        open_pr(server)
    reset_at = caught.value.reset_at
    assert reset_at is not None
    assert before + timedelta(seconds=119) <= reset_at <= datetime.now(UTC) + timedelta(seconds=121)


def test_429_without_headers_is_still_a_quota_error(server: GitHubServer) -> None:
    server.script(Reply(429, {"message": "Too Many Requests"}))
    with pytest.raises(GitHubQuotaError) as caught:
        open_pr(server)
    assert caught.value.reset_at is None and caught.value.status == 429


def test_github_enterprise_api_base_with_a_path_prefix(server: GitHubServer) -> None:
    pull = open_pr(server, api_base=server.api_base + "/api/v3/")
    assert pull.number == 1
    assert server.calls[0].path == "/api/v3/repos/octo/slug/pulls"


def test_an_unreachable_api_is_a_clear_error() -> None:
    with GitHubServer() as stopped:
        base = stopped.api_base
    with pytest.raises(GitHubError, match="cannot reach the GitHub API") as info:
        open_pull_request(base, "octo/slug", TOKEN, "b", "main", "t", "", timeout=2)
    assert f"{base}/repos/octo/slug/pulls" in str(info.value)  # where it tried
    with_user = base.replace("://", "://robot:pat-secret@")
    with pytest.raises(GitHubError) as info:
        open_pull_request(with_user, "octo/slug", TOKEN, "b", "main", "t", "", timeout=2)
    assert "pat-secret" not in str(info.value) and TOKEN not in str(info.value)
    assert base.replace("://", "://***@") in str(info.value)


def test_bad_inputs_fail_before_any_request(server: GitHubServer) -> None:
    with pytest.raises(GitHubError, match="owner/name"):
        open_pr(server, repo="not a repo")
    with pytest.raises(GitHubAuthError, match="GITHUB_TOKEN is empty"):
        open_pr(server, token="  ")
    assert server.calls == []


def test_a_scripted_401_is_served_once_then_github_behaviour_resumes(
    server: GitHubServer,
) -> None:
    server.script(BAD_CREDENTIALS)
    with pytest.raises(GitHubAuthError):
        open_pr(server)
    assert open_pr(server).number == 1
    assert github.DEFAULT_API_BASE == "https://api.github.com"


def test_importing_the_client_leaves_httpx_unloaded() -> None:
    # Every `assay run` imports this module (for the pr land mode); httpx waits for a PR.
    code = "import sys, assay.adapters.github; sys.exit('httpx' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
