"""The shared repository: a remote every machine reaches (``origin``).

With an origin, a run starts from the origin's tip of the branch its task targets (fetched
first, never the worker's own branch, which may hold anything) and what it lands goes back
there: ``merge`` pushes the squashed commit only if the origin's branch still points at the
commit it was combined with (``--force-with-lease`` with that exact value, which the receiving
side checks under its ref lock: a compare-and-swap), ``branch`` pushes the branch. Fetch and
push run with the operator's git configuration (credential helpers, ``url.insteadOf``, ssh
settings are theirs to give) but never a hook, and never prompt.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Collection, Sequence
from pathlib import Path

from assay.adapters.git import _CONFIG, _text, config_env
from assay.adapters.landing import Revalidate, SquashMessage, landed_commit, squash_onto
from assay.core.forbidden import ASSAY_HOME

AUTO = "auto"
NONE = "none"
NETWORK_TIMEOUT_SECONDS = 300.0
# Pushes lost to other machines before giving up: each one re-fetches and, where the tree is
# new, revalidates; a busy origin with several workers loses more than a local branch does.
PUSH_TRIES = 8

# What git says when the remote's ref is no longer the value the push was made against.
_MOVED = ("stale info", "fetch first", "non-fast-forward", "cannot lock ref")
_CREDENTIALS = re.compile(r"(\w+://)[^/@\s]+@")


class OriginError(Exception):
    """A fetch or push that failed for a reason other than the branch having moved: the
    network, credentials, a missing branch, the remote refusing. The message never carries
    a URL's credentials."""


def resolve(repo: Path, asked: str | None) -> str | None:
    """The remote runs of ``repo`` share, from an ``--origin`` value: ``auto`` is the remote
    named ``origin`` when there is one, ``none`` (or nothing asked) is no origin, and any other
    value must name a remote of ``repo`` (else :class:`OriginError`)."""
    if asked is None or asked == NONE:
        return None
    remotes = set(_git(repo, "remote").stdout.decode(errors="replace").split())
    if asked == AUTO:
        return "origin" if "origin" in remotes else None
    if asked not in remotes:
        known = ", ".join(sorted(remotes)) or "none"
        raise OriginError(f"{repo} has no remote named {asked!r} (its remotes: {known})")
    return asked


def tracking_ref(remote: str, branch: str) -> str:
    """Where this repository keeps what it last saw of ``remote``'s ``branch``."""
    return f"refs/remotes/{remote}/{branch}"


def fetch_branch(repo: Path, remote: str, branch: str) -> str:
    """Fetch ``branch`` from ``remote``; the commit it points at there now."""
    ref = tracking_ref(remote, branch)
    done = _git(repo, "fetch", "--no-tags", "--quiet", remote, f"+refs/heads/{branch}:{ref}")
    if done.returncode != 0:
        raise OriginError(f"fetching {branch} from {remote} failed: {_said(done)}")
    return _text(_git(repo, "rev-parse", "--verify", f"{ref}^{{commit}}").stdout).strip()


def push_commit(repo: Path, remote: str, commit: str, branch: str, expected: str) -> bool:
    """Move ``remote``'s ``branch`` from ``expected`` to ``commit``; False when it no longer
    points at ``expected`` (nothing moved: fetch and try again), :class:`OriginError` when the
    push failed otherwise. The local tracking ref follows a push that went through."""
    lease = f"--force-with-lease=refs/heads/{branch}:{expected}"
    done = _git(repo, "push", "--porcelain", lease, remote, f"{commit}:refs/heads/{branch}")
    if done.returncode == 0:
        _git(repo, "update-ref", tracking_ref(remote, branch), commit)
        return True
    said = _said(done)
    if any(word in said for word in _MOVED):
        return False
    raise OriginError(f"pushing to {branch} on {remote} failed: {said}")


def push_branch(repo: Path, remote: str, branch: str) -> None:
    """Publish the local ``branch`` on ``remote`` under the same name (never forced)."""
    done = _git(repo, "push", "--porcelain", remote, f"refs/heads/{branch}:refs/heads/{branch}")
    if done.returncode != 0:
        raise OriginError(f"pushing {branch} to {remote} failed: {_said(done)}")


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = config_env()
    env["GIT_TERMINAL_PROMPT"] = "0"  # a missing credential fails; it never waits for a human
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *_CONFIG, *args],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            env=env,
            timeout=NETWORK_TIMEOUT_SECONDS,
            check=False,
            start_new_session=True,  # a terminal's Ctrl-C reaches assay, never its own git
        )
    except subprocess.TimeoutExpired as exc:
        raise OriginError(
            f"git {args[0]} gave no answer in {NETWORK_TIMEOUT_SECONDS:.0f} s"
        ) from exc


def _said(done: subprocess.CompletedProcess[bytes]) -> str:
    """git's own words (its porcelain lines and stderr), bounded, credentials removed."""
    lines: Sequence[str] = [
        line
        for line in (_text(done.stdout) + "\n" + _text(done.stderr)).splitlines()
        if line.strip() and line.strip() not in ("Done", "To")
    ]
    text = "; ".join(line.strip() for line in lines)[-600:] or f"exit {done.returncode}"
    return _CREDENTIALS.sub(r"\1", text)


def push_squash(
    repo: Path,
    *,
    remote: str,
    branch: str,
    into_branch: str,
    base_commit: str,
    message: SquashMessage,
    revalidate: Revalidate | None = None,
    validated: Collection[str] | None = None,
    assay_homes: Collection[str] = (ASSAY_HOME,),
    tries: int = PUSH_TRIES,
) -> str:
    """Land the tree of the local ``branch`` on ``remote``'s ``into_branch`` as one squashed
    commit; that commit. :func:`assay.adapters.landing.land_squash`'s rules (idempotent by the
    run's trailer, revalidation of a combined tree, only validated trees), with the origin's
    branch as the ref: read by a fetch, moved by a leased push. A push that lost to another
    machine's fetches again and recomputes, ``tries`` times at most; no local branch or
    checkout changes."""
    tip = fetch_branch(repo, remote, into_branch)
    seen = tracking_ref(remote, into_branch)
    found = landed_commit(repo, seen, message.run_id, since=base_commit)
    if found is not None:
        return found
    candidate = _text(_git(repo, "rev-parse", "--verify", f"refs/heads/{branch}^{{commit}}").stdout)
    fetched = [tip]

    def read_tip() -> str:
        if fetched:  # the fetch above is fresh: the first try uses it
            return fetched.pop()
        return fetch_branch(repo, remote, into_branch)

    _, commit = squash_onto(
        repo,
        candidate=candidate.strip(),
        base_commit=base_commit,
        message=message,
        tip=read_tip,
        swap=lambda old, commit, _written: push_commit(repo, remote, commit, into_branch, old),
        revalidate=revalidate,
        validated=validated,
        assay_homes=assay_homes,
        tries=tries,
        what=f"{into_branch} on {remote} kept moving while {branch} was being landed",
    )
    return commit
