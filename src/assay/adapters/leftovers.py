"""What runs left on disk and in the user's repository, found and removed for ``assay gc``.

Found: the folders under ``.assay/seats`` (seat repositories and homes, one folder per run)
and ``.assay/worktrees`` (seat worktrees of older versions), and the branches
``assay/<run>/<seat>`` whose ``<run>`` is named like a run. Which of them go is decided
elsewhere (:func:`assay.core.gc.plan_gc`); here they are measured and removed: a folder is
removed without following a link, a branch only if it still points where it pointed when it
was found (``git update-ref -d <ref> <old>``, so a branch someone moved meanwhile stays).
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

from assay.adapters import folders, git
from assay.adapters.git import GitError, _run, _text
from assay.core.gc import Leftover
from assay.core.vocab import LeftoverKind

BRANCH_PREFIX = "refs/heads/assay/"
# ``r<yyyymmdd>-<hhmmss>-<hex>``: a branch ``assay/<this>/…`` is a run's, any other the user's.
RUN_ID = re.compile(r"r\d{8}-\d{6}-[0-9a-f]{4,32}")
# How far a leftover's size is counted (a seat holds what a coder made: any shape, any size).
SIZE_MAX_ENTRIES = 1_000_000
SIZE_MAX_DEPTH = 256


def find_folders(home: Path) -> list[Leftover]:
    """Every run's folder under ``<home>/seats`` and ``<home>/worktrees``, with its size."""
    found = []
    for kind, root in (
        (LeftoverKind.SEATS, home / "seats"),
        (LeftoverKind.WORKTREES, home / "worktrees"),
    ):
        with contextlib.suppress(OSError):
            for folder in sorted(root.iterdir()):
                if folder.is_dir() and not folder.is_symlink():
                    found.append(
                        Leftover(
                            kind=kind,
                            target=str(folder),
                            run_id=folder.name,
                            bytes=tree_size(folder),
                        )
                    )
    return found


def find_branches(repo: Path) -> list[Leftover]:
    """Every branch ``assay/<run>/…`` of a run, with its commit, the worktree it is checked out
    in (if any) and the size of the objects only it reaches."""
    listed = _run(repo, "for-each-ref", "--format=%(objectname) %(refname)", BRANCH_PREFIX)
    checked_out = _checked_out(repo)
    found = []
    for line in _text(listed.stdout).splitlines():
        commit, _, ref = line.partition(" ")
        parts = ref.removeprefix("refs/heads/").split("/")
        if len(parts) < 3 or not RUN_ID.fullmatch(parts[1]):
            continue
        branch = "/".join(parts)
        found.append(
            Leftover(
                kind=LeftoverKind.BRANCH,
                target=branch,
                run_id=parts[1],
                bytes=_unique_bytes(repo, ref),
                commit=commit,
                checked_out_at=checked_out.get(ref),
            )
        )
    return found


def remove(repo: Path, leftover: Leftover) -> None:
    """Remove one leftover; GitError or OSError when it could not be (it is then still there)."""
    if leftover.kind is LeftoverKind.BRANCH:
        ref = f"refs/heads/{leftover.target}"
        args = ("update-ref", "-d", "--", ref) + ((leftover.commit,) if leftover.commit else ())
        _run(repo, *args)
        return
    path = Path(leftover.target)
    if leftover.kind is LeftoverKind.WORKTREES:
        for child in sorted(path.iterdir()) if path.is_dir() else []:
            git.remove_worktree(repo, child)
    removal = folders.remove_tree(path)
    if not removal.complete:
        raise OSError(removal.summary())
    with contextlib.suppress(OSError):
        path.parent.rmdir()  # the last one gone: no empty ``seats/`` or ``worktrees/`` left


def tree_size(path: Path) -> int:
    """The bytes of the files under ``path`` (links counted as themselves, never followed);
    a tree past the walk's bounds is counted as far as they go."""
    listed = folders.walk(path, max_entries=SIZE_MAX_ENTRIES, max_depth=SIZE_MAX_DEPTH)
    return sum(entry.info.st_size for entry in listed if not entry.is_dir)


def _checked_out(repo: Path) -> dict[str, str]:
    """Branch ref -> the worktree (the main one included) that has it checked out."""
    listed = _text(_run(repo, "worktree", "list", "--porcelain").stdout)
    found: dict[str, str] = {}
    path = ""
    for line in listed.splitlines():
        if line.startswith("worktree "):
            path = line.removeprefix("worktree ")
        elif line.startswith("branch "):
            found[line.removeprefix("branch ")] = path
    return found


def _unique_bytes(repo: Path, ref: str) -> int | None:
    """The on-disk size of the objects ``ref`` reaches and no other ref does (None when git
    cannot tell): what git's own gc may prune once the branch is gone."""
    try:
        done = _run(
            repo,
            *("rev-list", "--objects", "--disk-usage", ref),
            *("--not", f"--exclude={ref}", "--all"),
        )
    except GitError:
        return None
    with contextlib.suppress(ValueError):
        return int(_text(done.stdout).strip() or 0)
    return None
