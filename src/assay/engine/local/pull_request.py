"""The ``pr`` land mode: push the candidate branch and open a pull request for it.

A pull request is a hand-off to a human, so nothing here may crash a run, and a pull request
that was never opened is never Done. Every problem leaves the branch in place and says what to
fix, sorted into one of two kinds: a *machine fault* (the GitHub API answering 5xx, a rate
limit, a timeout, a push failing on the network), after which the run is refunded and the task
lands again later; or a *refusal* (401, 403, 404, a 422 other than "already exists", a setting
that is missing), after which the task is held for a human with the API's message. Settings are
checked before anything is pushed, so a misconfigured contract publishes nothing. A blocked
run opens its PR as a draft titled ``[blocked] …`` with the failures in the body; settle then
holds the task for the human who reviews it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.adapters import git, github
from assay.adapters.origin import failed_on_the_network
from assay.core.contract import Contract
from assay.core.vocab import EventKind, RunStatus
from assay.engine.effects import LandOutcome, RunPlan

# Called as each step takes effect (``land.pushed``, ``land.pr_opened``), so a run that dies
# after it is closed from what really happened: a pull request is opened once.
LandRecorder = Callable[[EventKind, dict[str, Any]], None]

BLOCKED_PREFIX = "[blocked] "
DEFAULT_BODY = (
    "{task}\n\n---\nOpened by assay: task `{task_id}`, run `{run_id}`, branch `{branch}`."
)
_BODY_LIMIT = 60_000  # GitHub refuses bodies over 65,536 characters
_FAILURE_LINES = 20
_FAILURE_HEAD = 200
_FAILURE_CHARS = 1500


@dataclass(frozen=True)
class PullRequestLanding:
    """What opening the pull request did: the land outcome, and a warning when it fell short."""

    outcome: LandOutcome
    warning: str | None = None


class _NotOpened(Exception):
    """Why no pull request was opened; the branch stays as it is. ``fault``: the machine's
    (retry later), else a refusal a human must resolve."""

    def __init__(self, message: str, *, fault: bool = False) -> None:
        super().__init__(message)
        self.fault = fault


def api_fault(exc: github.GitHubError) -> bool:
    """Whether the API's failure is the machine's: unreachable, a timeout, 5xx, a rate limit,
    or an answer it could not have meant; 4xx answers are refusals."""
    if isinstance(exc, github.GitHubQuotaError):
        return True
    return exc.status is None or exc.status >= 500


def land_pull_request(
    plan: RunPlan,
    branch: str,
    env: Mapping[str, str],
    *,
    blocked: bool = False,
    failures: Sequence[str] = (),
    record: LandRecorder | None = None,
) -> PullRequestLanding:
    """Push ``branch`` to the contract's remote and open (or find) its pull request;
    ``record`` hears of each step as it takes effect."""
    status = RunStatus.BLOCKED if blocked else RunStatus.READY
    note = record or (lambda kind, data: None)
    pushed: str | None = None
    try:
        request = _prepare(plan, branch, env, blocked=blocked, failures=failures)
        try:
            git.push_branch(plan.repo_root, branch, request.remote)
        except git.GitError as exc:
            raise _NotOpened(
                f"pushing {branch} to {request.remote} failed: {exc}",
                fault=failed_on_the_network(str(exc)),
            ) from None
        pushed = request.remote
        note(
            EventKind.LAND_PUSHED, {"branch": branch, "remote": request.remote, "blocked": blocked}
        )
        try:
            pull = github.open_pull_request(
                request.api_base,
                request.repo,
                request.token,
                head=branch,
                base=request.base,
                title=request.title,
                body=request.body,
                draft=request.draft,
            )
        except github.GitHubError as exc:
            raise _NotOpened(
                f"{exc} (branch {branch} was pushed to {request.remote})", fault=api_fault(exc)
            ) from None
    except (_NotOpened, git.GitError) as why:
        warning = f"pull request not opened: {why}"
        detail = f"branch {branch} left; {warning}"
        if blocked:  # already a hand-off that failed; the run stays blocked
            return PullRequestLanding(LandOutcome(status, detail, branch), warning)
        fault = isinstance(why, _NotOpened) and why.fault
        if fault and pushed is not None:  # refunded: nothing of this run stays published
            kept = delete_remote_branch(plan.repo_root, pushed, branch)
            warning += f"; {kept}" if kept else f"; deleted from {pushed} again (lands later)"
        outcome = LandOutcome(
            RunStatus.FAILED if fault else RunStatus.BLOCKED,
            detail,
            branch,
            machine_fault=fault,
            refused=not fault,
        )
        return PullRequestLanding(outcome, warning)
    note(
        EventKind.LAND_PR_OPENED,
        {"branch": branch, "url": pull.html_url, "number": pull.number, "blocked": blocked},
    )
    kind = "draft pull request" if request.draft else "pull request"
    detail = f"{kind} #{pull.number} opened: {pull.html_url} ({branch} into {request.base})"
    return PullRequestLanding(
        LandOutcome(status, detail, branch, left_pr=True, pr_url=pull.html_url)
    )


def delete_remote_branch(repo_root: Path, remote: str, branch: str) -> str | None:
    """Delete ``branch`` from ``remote``, best effort: None when done, else a warning."""
    try:
        git.delete_remote_branch(repo_root, remote, branch)
    except git.GitError as exc:
        return f"the pushed branch {branch} could not be deleted from {remote}: {exc}"
    return None


def find_open_pull_request(
    contract: Contract, repo_root: Path, branch: str, env: Mapping[str, str]
) -> github.PullRequest | None:
    """The open pull request for ``branch``, asked of the API (a run that died between the
    push and recording its PR); None when there is none. Raises GitHubError when it cannot tell.
    """
    try:
        target = github.pull_target(repo_root, contract.pr, "-", env)
    except github.TargetMissing:
        raise github.GitHubError("the pull request settings or the token are missing") from None
    return github.find_pull_request(target.api_base, target.repo, target.token, head=branch)


@dataclass(frozen=True)
class _Request:
    remote: str
    repo: str
    api_base: str
    token: str
    base: str
    title: str
    body: str
    draft: bool


def _prepare(
    plan: RunPlan,
    branch: str,
    env: Mapping[str, str],
    *,
    blocked: bool,
    failures: Sequence[str],
) -> _Request:
    """Every setting the PR needs, resolved before anything is pushed."""
    settings = plan.contract.pr
    try:
        target = github.pull_target(plan.repo_root, settings, plan.base_branch, env)
    except github.TargetMissing as exc:
        raise _NotOpened(str(exc)) from None
    base = target.base
    first_line = plan.contract.task.strip().splitlines()[0]
    fields = {
        "title": first_line[:72],
        "task": plan.contract.task.strip(),
        "task_id": plan.task_id,
        "run_id": plan.run_id,
        "branch": branch,
        "base": base,
    }
    title = settings.render(settings.title, fields).strip() or fields["title"]
    body = settings.render(settings.body or DEFAULT_BODY, fields)
    if blocked:
        title = BLOCKED_PREFIX + title
        body = _blocked_preamble(failures) + body
    return _Request(
        remote=target.remote,
        repo=target.repo,
        api_base=target.api_base,
        token=target.token,
        base=base,
        title=title[:250],
        body=body[:_BODY_LIMIT],
        draft=settings.draft or blocked,
    )


def _blocked_preamble(failures: Sequence[str]) -> str:
    lines = [
        "**Blocked.** The contract's validators still fail on this change after every "
        "recovery attempt; assay left it as a draft for a human to review. Do not merge it "
        "as it is.",
        "",
        "Failures in the last attempt:",
        "",
    ]
    lines.extend(_failure_item(f) for f in failures[:_FAILURE_LINES])
    if len(failures) > _FAILURE_LINES:
        lines.append(f"- … and {len(failures) - _FAILURE_LINES} more")
    if not failures:
        lines.append("- (no failure was recorded)")
    return "\n".join(lines) + "\n\n"


def _failure_item(failure: str) -> str:
    """A bullet with the failure's first line; the rest (test output) in a code block under it."""
    head, _, rest = failure.strip().partition("\n")
    if len(head) > _FAILURE_HEAD:
        head, rest = head[:_FAILURE_HEAD] + " …", head[_FAILURE_HEAD:] + "\n" + rest
    rest = rest.strip()[:_FAILURE_CHARS]
    if not rest:
        return f"- {head}"
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", rest)), default=0))
    block = "\n".join(f"  {line}" for line in [fence + "text", *rest.splitlines(), fence])
    return f"- {head}\n{block}"
