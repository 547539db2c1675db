"""Pull requests through the GitHub REST API (github.com or GitHub Enterprise).

Only what the ``pr`` land mode needs: open a pull request, or find the one already open for the
branch (so a re-run does not fail on GitHub's "already exists", and a run that died after its
push can tell whether its pull request was opened). Every failure is a
:class:`GitHubError` whose message says what to fix; the token goes in the ``Authorization``
header only and never appears in a message, a log or the request body. httpx is imported
when a pull request is opened, not with this module: every ``assay run`` imports it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.adapters import git
from assay.core.contract import PullRequestSettings
from assay.core.text import address_shown

if TYPE_CHECKING:
    import httpx

DEFAULT_API_BASE = "https://api.github.com"
API_BASE_ENV = "ASSAY_GITHUB_API"
TOKEN_ENV = "GITHUB_TOKEN"
API_VERSION = "2022-11-28"
TIMEOUT_SECONDS = 30.0
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SCP_LIKE = re.compile(r"^(?:[^@/\s]+@)?[^@/:\s]+:(?!//)(.+)$")


class GitHubError(RuntimeError):
    """The API refused or could not be reached; the message names the fix."""

    def __init__(self, message: str, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class GitHubAuthError(GitHubError):
    """401, or 403 without a rate limit: the token is missing, wrong or lacks a scope."""


class GitHubNotFoundError(GitHubError):
    """404: the repository does not exist, or the token cannot see it."""


class GitHubQuotaError(GitHubError):
    """A primary or secondary rate limit; ``reset_at`` is when the API said to try again."""

    def __init__(self, message: str, status: int, reset_at: datetime | None) -> None:
        self.reset_at = reset_at
        super().__init__(message, status)


@dataclass(frozen=True, slots=True)
class PullRequest:
    """An open pull request: its number, its API url, and the page a human opens."""

    number: int
    url: str
    html_url: str


@dataclass(frozen=True)
class PullTarget:
    """Where a pull request goes, and with what: resolved before anything is pushed."""

    remote: str
    repo: str  # owner/name
    base: str
    api_base: str
    token: str = field(repr=False)


class TargetMissing(ValueError):
    """A setting a pull request needs is missing here; the message says which and how."""


def pull_target(
    repo_root: Path,
    settings: PullRequestSettings,
    base_branch: str | None,
    env: Mapping[str, str],
) -> PullTarget:
    """The pull request's target from the contract's ``pr`` settings, the branch the run
    starts from and the operator's environment; :class:`TargetMissing` naming the first
    setting that is missing (the token, a base, the remote, the repository)."""
    token = env.get(TOKEN_ENV, "").strip()
    if not token:
        raise TargetMissing(
            f"{TOKEN_ENV} is not set; export a token that may push and open pull "
            "requests on the repository"
        )
    base = settings.base or base_branch
    if base is None:
        raise TargetMissing("the run started on a detached HEAD; set `pr.base` in the contract")
    url = git.remote_url(repo_root, settings.remote)
    if url is None:
        raise TargetMissing(f"the repository has no remote named {settings.remote!r} (`pr.remote`)")
    repo = settings.repo or repo_from_remote_url(url)
    if repo is None:
        raise TargetMissing(
            f"cannot tell the GitHub repository from remote {settings.remote} "
            f"({address_shown(url)}); set `pr.repo: owner/name` in the contract"
        )
    api_base = settings.api_base or env.get(API_BASE_ENV) or DEFAULT_API_BASE
    return PullTarget(remote=settings.remote, repo=repo, base=base, api_base=api_base, token=token)


def repo_from_remote_url(url: str) -> str | None:
    """``owner/name`` from a remote URL (https, ``git@host:o/r.git``, ``ssh://``), or None.

    A local path (a bare repository used as a remote) or ``file://`` URL names no GitHub
    repository: None, and the contract's ``pr.repo`` must say which one.
    """
    text = url.strip()
    if not text or text.startswith("file://"):
        return None
    if _SCHEME.match(text):
        path = text.split("://", 1)[1].partition("/")[2]
    else:
        scp = _SCP_LIKE.match(text)
        if scp is None:
            return None
        path = scp.group(1)
    parts = [p for p in path.split("?")[0].split("/") if p]
    if len(parts) < 2:
        return None
    owner, name = parts[-2], parts[-1].removesuffix(".git")
    candidate = f"{owner}/{name}"
    return candidate if _REPO.match(candidate) else None


def valid_repo(repo: str) -> bool:
    return bool(_REPO.match(repo))


def open_pull_request(
    api_base: str,
    repo: str,
    token: str,
    head: str,
    base: str,
    title: str,
    body: str,
    draft: bool = False,
    *,
    transport: httpx.BaseTransport | None = None,
    timeout: float = TIMEOUT_SECONDS,
) -> PullRequest:
    """Open a pull request of ``head`` into ``base`` in ``repo``; the open one if it exists.

    ``head`` is a branch of ``repo`` (or ``owner:branch`` for a fork).
    """
    import httpx

    if not valid_repo(repo):
        raise GitHubError(f"{repo!r} is not a repository name of the form owner/name")
    if not token.strip():
        raise GitHubAuthError(f"{TOKEN_ENV} is empty: set it to a token that may open PRs")
    root = api_base.rstrip("/")
    pulls = f"{root}/repos/{repo}/pulls"
    payload = {"title": title, "head": head, "base": base, "body": body, "draft": draft}
    with httpx.Client(
        headers=_headers(token), timeout=timeout, transport=transport, follow_redirects=True
    ) as client:
        response = _send(client, "POST", pulls, json=payload)
        if response.status_code == 201:
            return _pull(_json(response), pulls)
        if response.status_code == 422 and _already_exists(response):
            owner = repo.split("/", 1)[0]
            label = head if ":" in head else f"{owner}:{head}"
            found = _send(client, "GET", pulls, params={"head": label, "state": "open"})
            if found.status_code == 200:
                listed = _json(found)
                if isinstance(listed, list) and listed:
                    return _pull(listed[0], pulls)
                raise GitHubError(
                    f"GitHub says a pull request for {label} exists, but none is open in {repo}"
                )
            response = found
        raise _error(response, repo, root)


def find_pull_request(
    api_base: str,
    repo: str,
    token: str,
    head: str,
    *,
    transport: httpx.BaseTransport | None = None,
    timeout: float = TIMEOUT_SECONDS,
) -> PullRequest | None:
    """The open pull request of ``head`` (a branch of ``repo``, or ``owner:branch``) in
    ``repo``, or None when none is open."""
    import httpx

    if not valid_repo(repo):
        raise GitHubError(f"{repo!r} is not a repository name of the form owner/name")
    root = api_base.rstrip("/")
    pulls = f"{root}/repos/{repo}/pulls"
    owner = repo.split("/", 1)[0]
    label = head if ":" in head else f"{owner}:{head}"
    with httpx.Client(
        headers=_headers(token), timeout=timeout, transport=transport, follow_redirects=True
    ) as client:
        found = _send(client, "GET", pulls, params={"head": label, "state": "open"})
    if found.status_code != 200:
        raise _error(found, repo, root)
    listed = _json(found)
    if not isinstance(listed, list):
        raise GitHubError(f"the GitHub API at {pulls} answered without a list of pull requests")
    return _pull(listed[0], pulls) if listed else None


def _headers(token: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token.strip()}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": API_VERSION,
        "User-Agent": "assay",
    }


def _send(client: httpx.Client, method: str, url: str, **kwargs: Any) -> httpx.Response:
    import httpx

    from assay.core.text import address_shown

    try:
        return client.request(method, url, **kwargs)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        # httpx messages carry the URL at most, never the headers; the URL's own user info
        # (an `api_base` with a token in it) is never shown.
        where = address_shown(url)
        raise GitHubError(f"cannot reach the GitHub API at {where}: {exc}") from None


def _pull(data: object, pulls: str) -> PullRequest:
    if not isinstance(data, dict) or not isinstance(data.get("number"), int):
        raise GitHubError(f"the GitHub API at {pulls} answered without a pull request number")
    number = data["number"]
    url = str(data.get("url") or f"{pulls}/{number}")
    return PullRequest(number=number, url=url, html_url=str(data.get("html_url") or url))


def _json(response: httpx.Response) -> object:
    try:
        return response.json()
    except ValueError:
        return None


def _message(response: httpx.Response) -> str:
    data = _json(response)
    if data is None:
        return response.text.strip()[:300]
    if not isinstance(data, dict):
        return ""
    parts = [str(data.get("message") or "")]
    for error in data.get("errors") or []:
        if isinstance(error, dict):
            parts.append(str(error.get("message") or error.get("code") or ""))
        else:
            parts.append(str(error))
    return "; ".join(p for p in parts if p)[:500]


def _already_exists(response: httpx.Response) -> bool:
    return "pull request already exists" in _message(response).lower()


def _error(response: httpx.Response, repo: str, root: str) -> GitHubError:
    status = response.status_code
    said = _message(response) or response.reason_phrase
    limited, reset_at = _rate_limit(response, said)
    if limited:
        when = f"; retry after {reset_at.isoformat(timespec='seconds')}" if reset_at else ""
        return GitHubQuotaError(
            f"GitHub rate limit reached (HTTP {status}: {said}){when}", status, reset_at
        )
    if status == 401:
        return GitHubAuthError(
            f"GitHub rejected the token (HTTP 401: {said}): check that {TOKEN_ENV} holds a "
            "valid, unexpired token",
            status,
        )
    if status == 403:
        return GitHubAuthError(
            f"GitHub refused to open a pull request in {repo} (HTTP 403: {said}): the token in "
            f"{TOKEN_ENV} needs the `repo` scope (classic) or Pull requests: write and "
            "Contents: write (fine-grained) on this repository",
            status,
        )
    if status == 404:
        return GitHubNotFoundError(
            f"GitHub has no repository {repo} at {root} that this token can see (HTTP 404): "
            f"check `pr.repo` in the contract (owner/name), the API base ({API_BASE_ENV} for "
            "GitHub Enterprise) and that the token has access to it",
            status,
        )
    return GitHubError(f"GitHub could not open the pull request (HTTP {status}: {said})", status)


def _rate_limit(response: httpx.Response, said: str) -> tuple[bool, datetime | None]:
    """Whether the answer is a rate limit, and when the request may be retried.

    A primary limit is a 403 or 429 with ``x-ratelimit-remaining: 0`` and its reset in
    ``x-ratelimit-reset`` (epoch seconds); a secondary limit says so in its message and may give
    ``retry-after`` (seconds), which then wins.
    """
    status = response.status_code
    headers = response.headers
    exhausted = headers.get("x-ratelimit-remaining", "").strip() == "0"
    limited = status == 429 or (status == 403 and (exhausted or "rate limit" in said.lower()))
    if not limited:
        return False, None
    retry_after = headers.get("retry-after", "").strip()
    if retry_after.isdigit():
        return True, datetime.now(UTC) + timedelta(seconds=int(retry_after))
    reset = headers.get("x-ratelimit-reset", "").strip()
    if reset.isdigit():
        return True, datetime.fromtimestamp(int(reset), UTC)
    return True, None
