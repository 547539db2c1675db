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

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Collection, Sequence
from pathlib import Path

from assay.adapters.git import _CONFIG, _text, config_env
from assay.adapters.landing import Revalidate, SquashMessage, _rev, landed_commit, squash_onto
from assay.core.forbidden import ASSAY_HOME

AUTO = "auto"
NONE = "none"
NETWORK_TIMEOUT_SECONDS = 300.0
# Pushes lost to other machines before giving up: each one re-fetches and, where the tree is
# new, revalidates; a busy origin with several workers loses more than a local branch does.
PUSH_TRIES = 8

# The status git gives a ref whose value on the remote is no longer the one the push was
# made against: the client's lease, or the receiving side's own compare under its ref lock.
_MOVED = ("[rejected] (stale info", "[rejected] (fetch first", "[rejected] (non-fast-forward")
# The receiving side's own compare (its ref lock, the old value it was sent) failing: another
# push moved or is moving the ref. git says it in its status as one of these; a hook's refusal
# says "hook declined", a protected branch its own words.
_LOCKED = (
    "[remote rejected] (cannot lock ref",
    "[remote rejected] (failed to update ref",
    "[remote rejected] (failed to lock",
)
_CREDENTIALS = re.compile(r"(\w+://)[^/@\s]+@")


# A push that failed on the way, not on the remote's word: retried by a later run.
_NETWORK = (
    "could not resolve host",
    "connection refused",
    "failed to connect",  # curl, for http(s) remotes
    "couldn't connect to server",
    "connection timed out",
    "connection reset",
    "operation timed out",
    "timed out",
    "network is unreachable",
    "no route to host",
    "the remote end hung up unexpectedly",
    "early eof",
    "returned error: 5",
    "http 5",
    "ssl_error",
    "gnutls",
)


def failed_on_the_network(message: str) -> bool:
    """Whether a failed fetch's or push's message is the network's (a machine fault, tried
    again later) rather than the remote's refusal (a human's to resolve)."""
    low = message.lower()
    return any(marker in low for marker in _NETWORK)


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
    if _git(repo, "check-ref-format", "--branch", branch).returncode != 0 or "*" in branch:
        raise OriginError(f"{branch!r} is not a branch name: nothing to fetch from {remote}")
    ref = tracking_ref(remote, branch)
    done = _git(repo, "fetch", "--no-tags", "--quiet", remote, f"+refs/heads/{branch}:{ref}")
    if done.returncode != 0:
        raise OriginError(f"fetching {branch} from {remote} failed: {_said(done)}")
    found = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    tip = _text(found.stdout).strip()
    if found.returncode != 0 or not tip:
        raise OriginError(f"{remote} has no branch {branch} (fetched, nothing there)")
    return tip


def push_commit(repo: Path, remote: str, commit: str, branch: str, expected: str) -> bool:
    """Move ``remote``'s ``branch`` from ``expected`` to ``commit``; False when it no longer
    points at ``expected`` (nothing moved: fetch and try again), :class:`OriginError` when the
    push failed otherwise. The local tracking ref follows a push that went through."""
    lease = f"--force-with-lease=refs/heads/{branch}:{expected}"
    done = _git(repo, "push", "--porcelain", lease, remote, f"{commit}:refs/heads/{branch}")
    if done.returncode == 0:
        _git(repo, "update-ref", tracking_ref(remote, branch), commit)
        return True
    if _lost_race(done):
        return False
    raise OriginError(f"pushing to {branch} on {remote} failed: {_said(done)}")


def push_branch(repo: Path, remote: str, branch: str) -> None:
    """Publish the local ``branch`` on ``remote`` under the same name (never forced)."""
    done = _git(repo, "push", "--porcelain", remote, f"refs/heads/{branch}:refs/heads/{branch}")
    if done.returncode != 0:
        raise OriginError(f"pushing {branch} to {remote} failed: {_said(done)}")


def _lost_race(done: subprocess.CompletedProcess[bytes]) -> bool:
    """Whether the push's own status line (porcelain, on stdout: never a hook's words, which
    come on stderr as ``remote:`` lines) says the ref had moved."""
    for line in _text(done.stdout).splitlines():
        status = line.rsplit("\t", 1)[-1]
        if line.startswith("!") and status.startswith(_MOVED + _LOCKED):
            return True
    return False


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = config_env()
    env["GIT_TERMINAL_PROMPT"] = "0"  # a missing credential fails; it never waits for a human
    argv = ["git", "-C", str(repo), *_CONFIG, *args]
    # Its own session (a terminal's Ctrl-C reaches assay, never its own git), whose whole group
    # goes on a timeout: an ssh or https helper must not finish a push after it was given up.
    with subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=NETWORK_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise OriginError(
                f"git {args[0]} gave no answer in {NETWORK_TIMEOUT_SECONDS:.0f} s"
            ) from exc
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _said(done: subprocess.CompletedProcess[bytes]) -> str:
    """git's own words (its porcelain lines and stderr), bounded, credentials removed."""
    lines: Sequence[str] = [
        line
        for line in (_text(done.stdout) + "\n" + _text(done.stderr)).splitlines()
        if line.strip() and line.strip() not in ("Done", "To")
    ]
    text = _CREDENTIALS.sub(r"\1", "; ".join(line.strip() for line in lines))
    return text[-600:] or f"exit {done.returncode}"  # cut after: a cut never uncovers one


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
    candidate = _rev(repo, f"refs/heads/{branch}^{{commit}}")  # local: no network, no timeout
    fetched = [tip]

    def read_tip() -> str:
        if fetched:  # the fetch above is fresh: the first try uses it
            return fetched.pop()
        return fetch_branch(repo, remote, into_branch)

    _, commit = squash_onto(
        repo,
        candidate=candidate,
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
