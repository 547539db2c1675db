"""Landing on the base branch: one squashed commit per run, moved by compare-and-swap.

A merge puts exactly one new commit on the base branch: the winning candidate's final tree,
its parent the branch's tip, authored by the repository's own identity, with the task's title
and the trailers below. The attempts' checkpoint commits stay on the seat branch. The ref moves
only with ``git update-ref <ref> <new> <old>``, so two landers never lose each other's commit.
When the branch moved since the run began, the change is applied to the new tip (a 3-way merge
in the object store) and that combined tree is validated again before the ref moves: the base
branch only ever holds trees that passed the validators. The ``Assay-Run`` trailer finds a
landed run again, so a run recovered after its landing is never landed twice.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from assay.adapters.git import (
    _CONFIG,
    ASSAY_EMAIL,
    ASSAY_NAME,
    GIT_TIMEOUT_SECONDS,
    GitError,
    _env,
    _git_path,
    _out,
    _run,
    _text,
    config_env,
    current_branch,
    uncommitted,
)
from assay.core.forbidden import ASSAY_HOME, is_assay_home
from assay.core.text import printable

RUN_TRAILER = "Assay-Run"
TASK_TRAILER = "Assay-Task"
ATTEMPTS_TRAILER = "Assay-Attempts"
CODER_TRAILER = "Assay-Coder"
TITLE_LIMIT = 72
CAS_TRIES = 3

# Revalidation of a combined tree: (combined commit, its parent) -> None when the validators
# pass, else why they block ("the validators block: tests: ...").
Revalidate = Callable[[str, str], str | None]


class LandRefused(Exception):
    """Landing was refused and nothing was changed; the candidate branch is left as it is."""

    def __init__(self, reason: str, paths: Sequence[str] = ()) -> None:
        self.reason = reason  # a whole sentence: it names the paths where they belong
        self.paths = tuple(paths)
        super().__init__(reason)


def named(paths: Sequence[str], most: int = 5) -> str:
    """``a.py, b.py and 3 more``: the paths a refusal is about, bounded."""
    shown = ", ".join(paths[:most])
    return shown + (f" and {len(paths) - most} more" if len(paths) > most else "")


class LandBlocked(LandRefused):
    """The base branch moved and the change does not hold on the new tip (a conflict, or the
    validators block the combined tree): nothing landed, and the run is blocked. The reason
    already names the conflicting paths."""

    def __init__(self, reason: str, paths: Sequence[str] = ()) -> None:
        super().__init__(reason)
        self.paths = tuple(paths)


@dataclass(frozen=True, slots=True)
class SquashMessage:
    """What the squashed commit says: the task's title, a short body and the trailers."""

    task: str
    task_id: str
    run_id: str
    attempts: int
    blocked: int
    coder: str
    seat: int
    # Each contract validator with the severity it gave the landed candidate: "tests: pass".
    validators: Sequence[str] = ()

    @property
    def title(self) -> str:
        lines = printable(self.task).strip().splitlines()  # no escape reaches a subject
        first = lines[0].strip() if lines else ""
        return first if len(first) <= TITLE_LIMIT else first[: TITLE_LIMIT - 3].rstrip() + "..."

    def text(self) -> str:
        checks = "; ".join(self.validators) or "none besides the scope and secret checks"
        body = (
            f"Landed by assay: the candidate of seat {self.seat}, squashed.\nValidators: {checks}."
        )
        counted = (
            f"{self.attempts} ({self.blocked} blocked)" if self.blocked else str(self.attempts)
        )
        trailers = (
            f"{TASK_TRAILER}: {self.task_id}\n"
            f"{RUN_TRAILER}: {self.run_id}\n"
            f"{ATTEMPTS_TRAILER}: {counted}\n"
            f"{CODER_TRAILER}: {self.coder} (seat {self.seat})\n"
        )
        return f"{self.title}\n\n{body}\n\n{trailers}"


def landed_commit(repo: Path, branch: str, run_id: str, since: str | None = None) -> str | None:
    """The commit on ``branch`` whose ``Assay-Run`` trailer names ``run_id``, if any.

    ``since`` (the run's base commit) bounds the search to what came after it. ``branch`` may
    be a full ref (a remote's, as last fetched).
    """
    tip = branch if branch.startswith("refs/") else f"refs/heads/{branch}"
    done = _run(
        repo,
        "log",
        "--format=%H%x00%(trailers:key=" + RUN_TRAILER + ",valueonly,separator=%x01)",
        f"{since}..{tip}" if since else tip,
        "--",
        ok=(0, 128),
    )
    if done.returncode != 0:
        return None
    for line in _text(done.stdout).splitlines():
        commit, _, values = line.partition("\0")
        if run_id in (v.strip() for v in values.split("\x01")):
            return commit
    return None


def identity(repo: Path) -> tuple[str, str]:
    """(name, email) the repository's config gives, as git resolves it there (local, global,
    system); assay's own only for what is not configured. assay's git calls force
    ``user.name=assay``, so the config is read here without that override."""
    found = _config(repo, r"^user\.(name|email)$")
    return (found.get("user.name") or ASSAY_NAME, found.get("user.email") or ASSAY_EMAIL)


def _config(repo: Path, pattern: str) -> dict[str, str]:
    """The keys matching ``pattern``, each with its last value (as ``--get`` would give it),
    in one git call; a key set without a value, or to blanks, is left out."""
    done = subprocess.run(
        ["git", "-C", str(repo), "config", "-z", "--get-regexp", pattern],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        env=config_env(),  # the operator's global config: their identity is theirs to give
        timeout=GIT_TIMEOUT_SECONDS,
        check=False,
        start_new_session=True,  # a terminal's Ctrl-C reaches assay, never its own git
    )
    if done.returncode != 0:
        return {}
    found: dict[str, str] = {}
    for entry in _text(done.stdout).split("\0"):
        key, _, value = entry.partition("\n")
        if key:
            found[key] = value.strip()
    return {key: value for key, value in found.items() if value}


def _commit_tree(repo: Path, tree: str, parent: str, message: str) -> str:
    """``git commit-tree`` as the repository's own author and committer."""
    name, email = identity(repo)
    env = _env()
    env.update(
        GIT_AUTHOR_NAME=name,
        GIT_AUTHOR_EMAIL=email,
        GIT_COMMITTER_NAME=name,
        GIT_COMMITTER_EMAIL=email,
    )
    args = ("commit-tree", tree, "-p", parent, "-F", "-")
    done = subprocess.run(
        ["git", "-C", str(repo), *_CONFIG, *args],
        input=message.encode(),
        capture_output=True,
        env=env,
        timeout=GIT_TIMEOUT_SECONDS,
        check=False,
        start_new_session=True,  # a terminal's Ctrl-C reaches assay, never its own git
    )
    if done.returncode != 0:
        raise GitError(args, repo, done.returncode, _text(done.stderr))
    return _text(done.stdout).strip()


def _rev(repo: Path, rev: str) -> str:
    return _out(repo, "rev-parse", "--verify", "--end-of-options", rev)


def land_branch(repo: Path, branch: str) -> str:
    """Keep the candidate branch for a human; its name."""
    found = _run(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", ok=(0, 1))
    if found.returncode != 0:
        raise GitError(("rev-parse", branch), repo, 1, f"there is no branch {branch}")
    return branch


def land_squash(
    repo: Path,
    *,
    branch: str,
    into_branch: str,
    base_commit: str,
    message: SquashMessage,
    revalidate: Revalidate | None = None,
    validated: Collection[str] | None = None,
    assay_homes: Collection[str] = (ASSAY_HOME,),
    tries: int = CAS_TRIES,
    moved: Callable[[], None] = lambda: None,
) -> str:
    """Land the tree of ``branch`` on ``into_branch`` as one squashed commit; that commit.

    Idempotent: a commit of this run already on ``into_branch`` is returned as it is. Where
    ``into_branch`` is checked out, that checkout must be clean (no untracked file where the
    change writes) or :class:`LandRefused` is raised and nothing changes; it is then brought to
    the new commit. When ``into_branch`` no longer points at ``base_commit``, the change is
    combined with its tip and ``revalidate`` must pass that combined commit, else
    :class:`LandBlocked`. A lost compare-and-swap recomputes, ``tries`` times at most.
    ``validated``: the trees the checks ran on (a revalidation adds its own); the ref never
    moves to a tree outside them (:class:`LandRefused`). ``assay_homes``: where assay's folder
    lies in the tree; nothing lands there. ``moved`` is called once the ref moved, before the
    checkout is brought along (a process that dies there is finished by
    :func:`finish_landing`).
    """
    target = f"refs/heads/{into_branch}"
    found = landed_commit(repo, into_branch, message.run_id, since=base_commit)
    if found is not None:
        finish_landing(repo, into_branch, found)
        return found
    _refuse_in_progress(repo, target, into_branch)
    checkout = _checked_out_at(repo, target)
    if checkout is not None:
        _refuse_dirty(checkout, into_branch)
    candidate = _rev(repo, f"refs/heads/{branch}^{{commit}}")

    def swap(old: str, commit: str, written: set[str]) -> bool:
        _refuse_in_progress(repo, target, into_branch)  # again: one may have begun since
        if checkout is not None:  # checked again: revalidation may have taken minutes
            _ready_to_update(checkout, into_branch, written, _added(repo, old, commit))
        swapped = _run(
            repo, "update-ref", "-m", f"assay: land {branch}", target, commit, old, ok=(0, 1, 128)
        )
        return swapped.returncode == 0  # else another lander moved it first

    old, commit = squash_onto(
        repo,
        candidate=candidate,
        base_commit=base_commit,
        message=message,
        tip=lambda: _rev(repo, f"{target}^{{commit}}"),
        swap=swap,
        revalidate=revalidate,
        validated=validated,
        assay_homes=assay_homes,
        tries=tries,
        what=f"{into_branch} kept moving while {branch} was being landed",
    )
    moved()
    if checkout is not None:
        _bring_checkout(repo, checkout, target, old, commit)
    return commit


def squash_onto(
    repo: Path,
    *,
    candidate: str,
    base_commit: str,
    message: SquashMessage,
    tip: Callable[[], str],
    swap: Callable[[str, str, set[str]], bool],
    revalidate: Revalidate | None,
    validated: Collection[str] | None,
    assay_homes: Collection[str],
    tries: int,
    what: str,
) -> tuple[str, str]:
    """The compare-and-swap loop of a squashed landing, wherever the branch lives: read its
    ``tip``, combine the candidate's change with it, revalidate a tree not checked yet, then
    ``swap(old, commit, paths written)``, which moves the branch only if it still points at
    ``old`` (False: it moved; recompute). (old, commit) once swapped; ``what`` says why not."""
    checked: set[str] = set(validated) if validated is not None else set()
    if validated is None:
        checked.add(_rev(repo, f"{candidate}^{{tree}}"))
    for _ in range(tries):
        old = tip()
        if old != base_commit and not _descends(repo, old, base_commit):
            # Reset or force-pushed past the run's base: combining would put back what was
            # taken off (git would pick another merge base), so nothing lands.
            raise LandBlocked(
                f"the base branch was rewritten: it is at {old[:12]}, which does not contain "
                f"the run's base {base_commit[:12]}; nothing landed"
            )
        tree = _combine(repo, base_commit, old, candidate)
        commit = _commit_tree(repo, tree, old, message.text())
        if tree not in checked and old != base_commit:
            if revalidate is not None:
                problem = revalidate(commit, old)
                if problem is not None:
                    raise LandBlocked(
                        f"the base branch moved to {old[:12]}; combined with it {problem}"
                    )
            if validated is None:
                checked.add(tree)
            else:
                checked.update(validated)  # the revalidation recorded the tree it checked
        if tree not in checked:
            raise LandRefused(f"the tree {tree[:12]} was not the one validated; nothing landed")
        written = _written(repo, old, commit)
        _refuse_assay_home(written, assay_homes)
        if swap(old, commit, written):
            return old, commit
    raise LandRefused(f"{what} ({tries} tries)")


def _descends(repo: Path, commit: str, ancestor: str) -> bool:
    """Whether ``ancestor`` is in ``commit``'s history."""
    done = _run(repo, "merge-base", "--is-ancestor", ancestor, commit, ok=(0, 1))
    return done.returncode == 0


def _combine(repo: Path, base_commit: str, tip: str, candidate: str) -> str:
    """The tree of the candidate's change applied to ``tip`` (the candidate's own tree when the
    tip is still the base); a conflict is :class:`LandBlocked`.

    The change is first squashed onto the run's base (a commit of its own, never on a branch),
    so the 3-way merge uses the run's base as the merge base (git < 2.40 has no
    ``--merge-base``) and the attempts' checkpoints play no part.
    """
    tree = _rev(repo, f"{candidate}^{{tree}}")
    if tip == base_commit:
        return tree
    squashed = _out(repo, "commit-tree", tree, "-p", base_commit, "-m", "assay: squashed change")
    merged = _run(
        repo,
        *("merge-tree", "--write-tree", "--name-only", "--no-messages", "-z"),
        tip,
        squashed,
        ok=(0, 1),
    )
    combined, *conflicts = [p for p in _text(merged.stdout).split("\0") if p]
    if merged.returncode == 1:
        paths = sorted(set(conflicts))
        raise LandBlocked(
            f"the base branch moved to {tip[:12]}; combined with it the change conflicts in "
            + ", ".join(paths),
            paths,
        )
    return combined


def _refuse_dirty(checkout: Path, into_branch: str, tracked: list[str] | None = None) -> None:
    """A checkout of the base branch with uncommitted changes is never touched (``tracked``:
    its changed paths when its status was just read)."""
    tracked = uncommitted(checkout) if tracked is None else tracked
    if tracked:
        raise LandRefused(
            f"{into_branch} is checked out at {checkout} with uncommitted changes to "
            f"{named(tracked)}",
            tracked,
        )


def _written(repo: Path, old: str, commit: str) -> set[str]:
    """The paths moving the base branch from ``old`` to ``commit`` writes or removes."""
    listed = _text(_run(repo, "diff", "--no-renames", "--name-only", "-z", old, commit).stdout)
    return {p for p in listed.split("\0") if p}


def _refuse_assay_home(written: set[str], homes: Collection[str]) -> None:
    """Nothing lands in ``.assay/`` (or wherever ``homes`` says assay's folder is), assay's own
    folder in the user's checkout (a file there, a SQLite journal beside the ledger, would be
    read as assay's own). The scope check holds such a candidate first; this is the last line,
    before the base branch moves."""
    inside = sorted(p for p in written if is_assay_home(p, homes))
    if inside:
        raise LandRefused(
            f"the change writes into .assay/, assay's own folder: {named(inside)}", inside
        )


def _added(repo: Path, old: str, commit: str) -> set[str]:
    """The paths moving the base branch from ``old`` to ``commit`` creates (not in ``old``)."""
    listed = _run(repo, "diff", "--no-renames", "--diff-filter=A", "--name-only", "-z", old, commit)
    return {p for p in _text(listed.stdout).split("\0") if p}


def _ready_to_update(checkout: Path, into_branch: str, written: set[str], added: set[str]) -> None:
    """The checkout of the base branch may be updated: no uncommitted change, still on it, no
    untracked or ignored file in the way of what the new commit writes."""
    _refuse_dirty(checkout, into_branch)
    if current_branch(checkout) != into_branch:
        raise LandRefused(f"{checkout} no longer has {into_branch} checked out")
    if _git_path(checkout, "index.lock").exists():
        # The user's git is writing the index (a commit, an add -p): the branch must not
        # move under it, or that commit fails ("cannot lock ref") once it is done.
        raise LandRefused(f"git is at work in {checkout} (its index is locked)")
    collisions = _in_the_way(checkout, written, added)
    if collisions:
        raise LandRefused(
            f"untracked files in {checkout} would be overwritten: {named(collisions)}",
            collisions,
        )


def _in_the_way(checkout: Path, written: set[str], added: set[str]) -> list[str]:
    """What is on disk, not tracked, where the update creates a path: a file or link at it, a
    folder at it holding anything untracked, or a file or link where it needs a folder.

    Read from the disk, not from ``git status``: git counts ignored files as expendable and
    ``read-tree -u`` overwrites or deletes them (a local ``.env``, a build); they are the
    user's all the same."""
    found: set[str] = set()
    for path in added:
        if _occupied(checkout, path):
            found.add(path)
        parts = path.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            # A tracked file there is one the update removes, already checked unchanged.
            if folder not in written and _not_a_folder(checkout / folder):
                found.add(folder)
    return sorted(found)


def _not_a_folder(path: Path) -> bool:
    return os.path.lexists(path) and (path.is_symlink() or not path.is_dir())


def _occupied(checkout: Path, path: str) -> bool:
    full = checkout / path
    if _not_a_folder(full):
        return True
    if not full.is_dir():
        return False
    # A folder: in the way when it holds anything untracked, ignored files included.
    inside = _run(
        checkout,
        *("ls-files", "-z", "--others", "--directory", "--no-empty-directory"),
        "--",
        f":(literal){path}",
    )
    return bool(_text(inside.stdout).strip("\0"))


def _bring_checkout(repo: Path, checkout: Path, target: str, old: str, commit: str) -> None:
    """Move the checkout's index and files from ``old`` to ``commit`` (its branch already
    points there). If git refuses, the ref is swapped back, so the checkout never holds a
    branch whose files disagree with it.

    The index's stat data is refreshed first, as ``git status`` and ``git merge`` do: a file
    only touched or copied is clean, and ``read-tree`` alone would refuse it as "not
    uptodate". A file whose content changed stays changed, and is refused."""
    _run(checkout, "update-index", "-q", "--refresh", ok=(0, 1, 128))
    done = _run(checkout, "read-tree", "-m", "-u", old, commit, ok=(0, 128))
    if done.returncode == 0:
        return
    refused = _text(done.stderr).strip()
    _swap_back(repo, target, old, commit, f"git refused to update {checkout}: {refused}")


def _swap_back(
    repo: Path, target: str, old: str, commit: str, reason: str, paths: Sequence[str] = ()
) -> None:
    """Move ``target`` back from ``commit`` to ``old`` and raise :class:`LandRefused` with
    ``reason``; nothing when someone already landed on top of it (it stays, and their own
    update moves the files)."""
    undone = _run(repo, "update-ref", "-m", "assay: undo land", target, old, commit, ok=(0, 1, 128))
    if undone.returncode != 0:
        return
    raise LandRefused(reason, paths)


def finish_landing(repo: Path, into_branch: str, commit: str) -> None:
    """Finish the landing of ``commit`` on ``into_branch`` whose process died between moving
    the ref and bringing the checkout along: a checkout whose index holds none of the paths
    the commit writes as the commit has them (its files showing the change undone, the next
    ``commit -a`` undoing it) is brought now, as the landing would have, or the ref is swapped
    back and :class:`LandRefused` says why: a path the user changed since, staged or not
    (:func:`_bring_checkout`), a file untracked or ignored in the way (:func:`_in_the_way`).
    Changes the user staged elsewhere since are kept. A checkout already brought, a branch not
    checked out, or one landed on since, is left as it is."""
    target = f"refs/heads/{into_branch}"
    checkout = _checked_out_at(repo, target)
    if checkout is None or _rev(repo, f"{target}^{{commit}}") != commit:
        return  # another landing moved it since (its own update found the files)
    parents = _out(repo, "rev-list", "--parents", "-n", "1", commit).split()[1:]
    if len(parents) != 1:
        return
    old = parents[0]
    written = _written(repo, old, commit)
    if not written or written - _staged(checkout, commit):
        return  # brought: the index holds the commit's version of a path it writes
    collisions = _in_the_way(checkout, written, _added(repo, old, commit))
    if collisions:
        reason = f"untracked files in {checkout} would be overwritten: {named(collisions)}"
        _swap_back(repo, target, old, commit, reason, collisions)
        return
    _bring_checkout(repo, checkout, target, old, commit)


def _staged(checkout: Path, commit: str) -> set[str]:
    """The paths where the checkout's index differs from ``commit``."""
    listed = _run(checkout, "diff-index", "--cached", "--no-renames", "--name-only", "-z", commit)
    return {p for p in _text(listed.stdout).split("\0") if p}


# Where a working tree's git folder says which branch a rebase or a bisect in it works on.
_IN_PROGRESS = (
    ("rebase-merge/head-name", "rebased"),
    ("rebase-apply/head-name", "rebased"),
    ("BISECT_START", "bisected"),
)


def _refuse_in_progress(repo: Path, ref: str, into_branch: str) -> None:
    """A branch a rebase or a bisect works on is not moved, though no working tree has it
    checked out (its HEAD is detached meanwhile): git's ``branch -f`` refuses it as checked
    out, and a rebase whose branch moved fails at its end, its commits left detached."""
    common = Path(_out(repo, "rev-parse", "--git-common-dir"))
    common = common if common.is_absolute() else repo / common
    linked = common / "worktrees"
    folders = [common, *(sorted(linked.iterdir()) if linked.is_dir() else [])]
    for folder in folders:
        for state, doing in _IN_PROGRESS:
            try:
                named_there = (folder / state).read_text(errors="replace").strip()
            except OSError:
                continue
            if named_there in (ref, ref.removeprefix("refs/heads/")):
                raise LandRefused(f"{into_branch} is being {doing} in {_worktree_of(folder)}")


def _worktree_of(folder: Path) -> Path:
    """The working tree of a git folder: a linked one's ``gitdir`` file names its ``.git``."""
    try:
        return Path((folder / "gitdir").read_text(errors="replace").strip()).parent
    except OSError:
        return folder.parent


def _checked_out_at(repo: Path, ref: str) -> Path | None:
    """The working tree that has ``ref`` checked out, if any."""
    listing = _text(_run(repo, "worktree", "list", "--porcelain", "-z").stdout)
    path: Path | None = None
    for field in listing.split("\0"):
        if field.startswith("worktree "):
            path = Path(field.removeprefix("worktree "))
        elif field == f"branch {ref}" and path is not None:
            return path
    return None
