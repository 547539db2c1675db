"""assay's home folder (``.assay``, or ``ASSAY_HOME``): made only by a command that writes,
and kept out of ``git status``.

Every command that must create the home goes through :func:`make_home`, which creates it and
adds it to the repository's ``info/exclude`` (the common one of all worktrees; ``info/`` is
made when missing). A command that only reads never calls it: where there is no home, it
answers as for an empty one.
"""

from __future__ import annotations

from pathlib import Path

from assay.adapters import git
from assay.adapters.store.names import DEFAULT_HOME


def make_home(repo: Path, home: Path) -> Path:
    """Create ``home`` (with its parents) and keep git from listing it in ``repo``."""
    home.mkdir(parents=True, exist_ok=True)
    pattern = exclude_pattern(repo, home)
    if pattern is not None:
        git.ensure_excluded(repo, pattern)
    return home


def exclude_pattern(repo: Path, home: Path) -> str | None:
    """The ``info/exclude`` line that hides ``home`` from ``repo``'s status: ``.assay/`` for
    the default home (the line older versions wrote), the home's own path from the top for
    one ``ASSAY_HOME`` puts elsewhere inside the repository, None for one outside it."""
    try:
        inside = home.resolve().relative_to(repo.resolve())
    except ValueError:
        return None
    if inside == Path(DEFAULT_HOME):
        return f"{DEFAULT_HOME}/"
    if inside == Path():
        return None  # the repository itself: nothing to hide it from
    return "/" + "/".join(_escaped(part) for part in inside.parts) + "/"


def _escaped(part: str) -> str:
    """A path component as a literal gitignore pattern (its wildcards and leading ``#`` or
    ``!`` escaped)."""
    escaped = "".join(f"\\{c}" if c in "*?[\\" else c for c in part)
    return f"\\{escaped}" if escaped[:1] in ("#", "!") else escaped
