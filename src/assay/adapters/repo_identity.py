"""Which repository a task belongs to, as one string every clone of it agrees on.

Several machines share one ledger; a task records the repository it was queued in, and a
worker runs only its own repository's tasks. The id is, in order:

1. ``git config assay.repository`` when set: the operator's word, for two clones that reach
   the same origin by URLs that do not normalize alike;
2. the normalized URL of the remote ``origin`` (:func:`normalize_remote`): no scheme, no
   credentials (they must never reach the ledger), ``host/path`` with the host lowercased and
   no trailing ``/`` or ``.git``, so the ssh and https forms of one repository agree; a local
   path or ``file://`` URL is its resolved absolute path;
3. with no origin, or one on this machine's disk, that path (the repository's own, or its
   origin's) and its history's first commit, ``/srv/app#3f2a…``: a repository and the clones
   made from it agree, and an unrelated repository at the same path elsewhere does not;

and None for a repository with no commit.
"""

from __future__ import annotations

import re
from pathlib import Path

from assay.adapters import git

OVERRIDE_KEY = "assay.repository"
ROOT_DIGITS = 12

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def repository_id(repo: Path) -> str | None:
    """The id of the repository at ``repo`` (see the module's text)."""
    chosen = git.config_value(repo, OVERRIDE_KEY)
    if chosen:  # a URL pasted there loses its credentials too
        return normalize_remote(chosen) if _SCHEME.match(_bare(chosen)) or "@" in chosen else chosen
    url = git.remote_url(repo, "origin")
    local = local_path(url) if url else None
    if url and local is None:
        return normalize_remote(url)
    roots = git.root_commits(repo)
    if not roots:
        return None
    # A path is one machine's name for a repository, and another repository may stand at the
    # same path elsewhere: the history's first commit tells them apart.
    where = (repo / local).resolve() if local is not None else repo.resolve()
    return f"{where}#{min(roots)[:ROOT_DIGITS]}"


def current_target_branch(repo: Path) -> str | None:
    """The branch a task queued here targets: the one checked out (None when detached)."""
    return git.current_branch(repo)


def local_path(url: str) -> str | None:
    """The path a remote URL names on this machine (a ``file://`` URL, or a path as git reads
    one: no scheme and no ``host:`` before the first slash), else None."""
    if url.lower().startswith("file://"):
        rest = url[len("file://") :]
        # file:///abs (no host) or file://localhost/abs
        return "/" + rest.partition("/")[2] if not rest.startswith("/") else rest
    if _SCHEME.match(url) or _scp_split(url) is not None:
        return None
    return url


def _bare(url: str) -> str:
    """``url`` without a remote helper's ``<transport>::`` prefix (``https::https://…``)."""
    head, sep, rest = url.strip().partition("::")
    return rest if sep and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", head) else url.strip()


def normalize_remote(url: str) -> str:
    """A network remote's URL as ``host/path``: a helper's ``<transport>::`` prefix, scheme,
    credentials, port, query and fragment dropped, host lowercased, trailing ``/`` and
    ``.git`` stripped. Idempotent: an id it made (``host/path``) is read back as itself."""
    text = _bare(url)
    scheme = _SCHEME.match(text)
    if scheme is not None:
        rest = re.split(r"[?#]", text[scheme.end() :], maxsplit=1)[0]
        authority, _, path = rest.partition("/")
        host = _host(authority)
    else:
        split = _scp_split(text)
        if split is not None:
            host, path = split
        else:  # already ``host/path``
            authority, _, path = text.partition("/")
            host = _host(authority)
    ident = f"{host.lower()}/{path.lstrip('/')}"
    while (trimmed := ident.strip().removesuffix("/").removesuffix(".git")) != ident:
        ident = trimmed
    return ident


def _scp_split(text: str) -> tuple[str, str] | None:
    """``[user@]host:path`` (git's scp-like form: a colon before any slash) as (host, path),
    the user dropped; None for anything else."""
    head = text.split("/", 1)[0]
    at = head.rfind("@")
    start = at + 1
    if head[start:].startswith("["):  # [v6::addr]:path
        close = head.find("]", start)
        colon = head.find(":", close) if close >= 0 else -1
    else:
        colon = head.find(":", start)
    if colon < 0:
        return None
    return text[start:colon], text[colon + 1 :]


def _host(authority: str) -> str:
    """The host of a URL's authority: no ``user:password@``, no ``:port``."""
    hostport = authority.rpartition("@")[2]
    close = hostport.find("]") if hostport.startswith("[") else 0  # [v6::addr]:port
    colon = hostport.find(":", close) if close >= 0 else -1
    return hostport[:colon] if colon >= 0 else hostport
