"""Paths no candidate may carry, whatever its contract allows.

Three kinds of path reach past the change itself once landed, so they are a scope breach by
rule, not by contract:

- ``.assay`` at the top of the tree, or anything under it: assay's own folder in the user's
  checkout, where the ledger lives (a crafted ``.assay/assay.db-journal`` is a SQLite hot
  journal that rolls the ledger back to the coder's own the next time it is opened);
- any component named ``.git``, at any depth and in any case (``.GIT``, ``.Git``), also with
  the trailing dots and spaces and the characters HFS+ ignores that make a file system read it
  as ``.git``: a git directory planted in the tree is configuration and hooks git runs;
- a gitlink (mode ``160000``: a nested repository, a submodule entry) the base does not have.

Pure: the caller gives the change's file deltas and the base's gitlinks.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from enum import StrEnum

from assay.core.changes import FileDelta
from assay.core.vocab import FileChangeKind

GITLINK_MODE = "160000"
ASSAY_HOME = ".assay"

# Characters HFS+ ignores in a name (git's is_hfs_dotgit skips the same): ".g\u200cit" is ".git".
_HFS_IGNORED = frozenset(
    "\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u206a\u206b\u206c\u206d\u206e\u206f\ufeff"
)


class ForbiddenRule(StrEnum):
    """Why a path is forbidden by rule."""

    ASSAY_HOME = "assay-home"
    GIT_DIR = "git-dir"
    GITLINK = "gitlink"

    @property
    def why(self) -> str:
        return _WHY[self]


_WHY = {
    ForbiddenRule.ASSAY_HOME: "assay's own folder .assay/, where the ledger lives",
    ForbiddenRule.GIT_DIR: "a path named .git, a git directory",
    ForbiddenRule.GITLINK: "a nested repository (a gitlink) the base does not have",
}


@dataclass(frozen=True, slots=True)
class ForbiddenPath:
    """A path of the change that no candidate may carry, and the rule it breaks."""

    path: str
    rule: ForbiddenRule

    def describe(self) -> str:
        return f"{self.path} ({self.rule.why})"


def forbidden_paths(
    files: Iterable[FileDelta],
    base_gitlinks: Collection[str],
    homes: Collection[str] = (ASSAY_HOME,),
) -> list[ForbiddenPath]:
    """Every path ``files`` touch (a rename's old path too) that breaks a rule, sorted by
    path, one entry per path and rule. ``base_gitlinks``: the paths of the base's tree whose
    mode is ``160000``; a gitlink the change keeps there (a moved submodule pointer) is the
    base's, not the change's. ``homes``: where assay's folder lies in the tree (``.assay``, and
    wherever ``ASSAY_HOME`` moved it inside the repository)."""
    found: set[ForbiddenPath] = set()
    for delta in files:
        for path in (delta.path, delta.renamed_from):
            if path is None:
                continue
            if is_assay_home(path, homes):
                found.add(ForbiddenPath(path, ForbiddenRule.ASSAY_HOME))
            if names_git_dir(path):
                found.add(ForbiddenPath(path, ForbiddenRule.GIT_DIR))
        added_link = delta.kind is not FileChangeKind.DELETED and delta.new_mode == GITLINK_MODE
        if added_link and delta.path not in base_gitlinks:
            found.add(ForbiddenPath(delta.path, ForbiddenRule.GITLINK))
    return sorted(found, key=lambda f: (f.path, f.rule.value))


def gitlinks_in(files: Iterable[FileDelta]) -> list[str]:
    """The paths the change leaves as gitlinks: the only ones whose place in the base must be
    looked up (a change without one needs no look at the base)."""
    return sorted(
        {
            d.path
            for d in files
            if d.kind is not FileChangeKind.DELETED and d.new_mode == GITLINK_MODE
        }
    )


def is_assay_home(path: str, homes: Collection[str] = (ASSAY_HOME,)) -> bool:
    """``path`` is one of ``homes`` (``.assay`` at the top of the tree by default) or under it
    (any case: on a file system that ignores case, ``.ASSAY/`` is the same folder)."""
    parts = [_plain(part) for part in path.split("/")]
    for home in homes:
        wanted = [_plain(part) for part in home.strip("/").split("/") if part]
        if wanted and parts[: len(wanted)] == wanted:
            return True
    return False


def names_git_dir(path: str) -> bool:
    """A component of ``path`` reads as ``.git`` (any case, trailing dots or spaces, the
    characters HFS+ ignores)."""
    return any(_plain(part) == ".git" for part in path.split("/"))


def _plain(name: str) -> str:
    """``name`` as a case-folding file system that drops trailing dots and spaces (NTFS) and
    ignorable characters (HFS+) would read it."""
    kept = "".join(c for c in name if c not in _HFS_IGNORED) if not name.isascii() else name
    return kept.rstrip(". ").casefold()
