"""Seat repositories: each seat works in a git repository of its own, never in the user's.

A seat is ``<assay_dir>/seats/<run>/seat-N``: a fresh ``git init`` whose object store borrows
the user's through ``objects/info/alternates`` (read-only, nothing copied), with the base commit
checked out on the branch ``assay/<run>/seat-N``. It has no remote and no hooks, so nothing a
coder does to its ``.git`` reaches the user's repository. But assay itself runs git in the
seat after the coder (``add``, ``status``, ``commit``), and git obeys the repository it runs
in: a coder that set ``core.fsmonitor`` or a hook, pointed ``commondir`` or a symlink at the
user's ``.git``, or replaced ``.git`` with a ``gitdir:`` file, would have assay run its code or
write into the user's repository outside the sandbox. So :func:`secure` runs after every
process of the seat and before any git command of assay's there: ``.git`` must still be a real
directory holding no symlink or special file, and its config, hooks and alternates are put
back to exactly what assay wrote. The user's repository gets a candidate only by
:func:`fetch_candidate`, once its scope and secret checks passed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from assay.adapters import folders
from assay.adapters.git import ASSAY_EMAIL, ASSAY_NAME, GitError, _out, _run

# What a coder may not leave in a seat's git directory: files that make git read another
# repository's config, refs or objects (``commondir``), or config assay did not write.
# ``info/`` is assay's to write and it writes nothing there: a coder's ``info/attributes``
# could mark files ``-diff`` (their lines then hidden from the secret scan) and its
# ``info/exclude`` hide files from the change assay reads back.
_REDIRECTS = ("commondir", "gitdir", "config.worktree", "info", "objects/info/http-alternates")
# How much of a seat's .git is looked through (iteratively: a coder can nest any depth there).
GIT_DIR_MAX_ENTRIES = 1_000_000
GIT_DIR_MAX_DEPTH = 4_096


class SeatTampered(Exception):
    """The seat's ``.git`` was replaced or holds what git could be led astray by; assay runs no
    git command in it again (the seat is an error, and a later attempt starts a fresh one)."""


@dataclass(frozen=True)
class Seat:
    """One seat's repository and what assay wrote into its ``.git`` (put back after each
    process of the seat: ``config``, ``alternates``, ``shallow``)."""

    path: Path
    home: Path
    branch: str
    config: bytes
    alternates: bytes
    shallow: bytes | None = None

    @property
    def git_dir(self) -> Path:
        return self.path / ".git"


def seats_root(assay_dir: Path, run_id: str) -> Path:
    """Every seat of a run (and their homes): ``<assay_dir>/seats/<run>``."""
    return assay_dir / "seats" / run_id


def seat_path(assay_dir: Path, run_id: str, seat: int | str) -> Path:
    """Where one seat works: ``<assay_dir>/seats/<run>/<seat>``."""
    return seats_root(assay_dir, run_id) / str(seat)


def seat_home(path: Path) -> Path:
    """A seat's private ``$HOME``, beside its repository (``seat-N.home``)."""
    return path.with_name(path.name + ".home")


def object_stores(repo: Path) -> tuple[Path, ...]:
    """The user's object store and those it borrows in turn (its own alternates): what a seat
    reads, read-only. The first is the one a seat's alternates name."""
    common = Path(_out(repo, "rev-parse", "--git-common-dir"))
    store = (common if common.is_absolute() else repo / common).resolve() / "objects"
    found = [store]
    for raw in _read(store / "info" / "alternates").decode(errors="replace").splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            other = Path(line) if Path(line).is_absolute() else store / line
            if other.resolve().is_dir():
                found.append(other.resolve())
    return tuple(found)


def create_seat(
    repo: Path,
    path: Path,
    base_commit: str,
    branch: str,
    *,
    store: Path | None = None,
) -> Seat:
    """A repository at ``path`` with ``base_commit`` checked out on ``branch``, its objects
    borrowed from ``repo``'s store, and its private home beside it (kept if it exists)."""
    store = store or object_stores(repo)[0]
    if path.exists() or path.is_symlink():  # a seat left by a run that died: start afresh
        remove_tree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    home = seat_home(path)
    home.mkdir(exist_ok=True)
    # No template: no sample hooks, nothing assay did not write. The object format follows
    # the user's repository (a sha256 repository's objects are no use to a sha1 one).
    fmt = _out(repo, "rev-parse", "--show-object-format")
    _run(
        path.parent,
        *("init", "--quiet", "--template=", f"--object-format={fmt}"),
        *("--initial-branch", branch, str(path)),
    )
    git_dir = path / ".git"
    (git_dir / "hooks").mkdir()
    # A coder's own commits need an identity (its $HOME holds no git config) and no signing.
    with (git_dir / "config").open("a", encoding="utf-8") as config:
        config.write(f"[user]\n\tname = {ASSAY_NAME}\n\temail = {ASSAY_EMAIL}\n")
        config.write("[commit]\n\tgpgSign = false\n")
    alternates = f"{store}\n".encode()
    _write_new(git_dir / "objects" / "info" / "alternates", alternates)
    shallow = _read(store.parent / "shallow") or None  # a shallow clone's seat is shallow too
    if shallow is not None:
        _write_new(git_dir / "shallow", shallow)
    seat = Seat(
        path=path,
        home=home,
        branch=branch,
        config=(git_dir / "config").read_bytes(),
        alternates=alternates,
        shallow=shallow,
    )
    _run(path, "update-ref", f"refs/heads/{branch}", base_commit)
    _run(path, "read-tree", "--reset", "-u", "HEAD")
    return seat


def secure(seat: Seat) -> None:
    """Check the seat's ``.git`` and put back what assay wrote there; :class:`SeatTampered`
    when it was replaced or holds a symlink or special file (nothing is followed)."""
    for place, what in ((seat.path, "the seat"), (seat.git_dir, "the seat's .git")):
        try:
            mode = os.lstat(place).st_mode
        except OSError as exc:
            raise SeatTampered(f"{what} is gone ({exc.strerror})") from None
        if not stat.S_ISDIR(mode):
            kind = "a symbolic link" if stat.S_ISLNK(mode) else "a file"
            raise SeatTampered(f"{what} was replaced by {kind}; assay does not follow it")
    listed = folders.walk(
        seat.git_dir, max_entries=GIT_DIR_MAX_ENTRIES, max_depth=GIT_DIR_MAX_DEPTH
    )
    for entry in listed:
        mode = entry.info.st_mode
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            kind = "a symbolic link" if stat.S_ISLNK(mode) else "a special file"
            relative = entry.path.relative_to(seat.path)
            raise SeatTampered(f"{relative} is {kind}; assay does not follow it")
    if listed.cut:  # a part not looked at (too big, too deep, unreadable) could hide a link
        raise SeatTampered(f"{listed.cut[0]}; assay does not use it")
    try:
        _reset(seat)
    except OSError as exc:  # a folder made unremovable, say: not a repository assay uses
        raise SeatTampered(f"its .git cannot be reset ({exc})") from None


def _reset(seat: Seat) -> None:
    git_dir = seat.git_dir
    for name in _REDIRECTS:
        with contextlib.suppress(FileNotFoundError):
            _remove(git_dir / name)
    _replace(git_dir / "config", seat.config)
    hooks = git_dir / "hooks"
    with contextlib.suppress(FileNotFoundError):
        _remove(hooks)
    hooks.mkdir()
    (git_dir / "objects" / "info").mkdir(parents=True, exist_ok=True)
    _replace(git_dir / "objects" / "info" / "alternates", seat.alternates)
    if seat.shallow is None:
        (git_dir / "shallow").unlink(missing_ok=True)
    else:
        _replace(git_dir / "shallow", seat.shallow)


def candidate_commit(seat: Seat, base_commit: str, message: str) -> str:
    """A commit of the seat's staged tree (what was read back and is validated) whose only
    parent is ``base_commit``: what may later be fetched into the user's repository. Never the
    seat's own history, which the coder can shape (a secret committed, then removed, would
    travel with it); only the candidate's tree and the user's own base."""
    tree = _out(seat.path, "write-tree")
    return _out(seat.path, "commit-tree", tree, "-p", base_commit, "-m", message)


def fetch_candidate(repo: Path, seat: Seat, commit: str, branch: str | None = None) -> str:
    """Bring ``commit`` from the seat into ``repo`` as ``refs/heads/<branch>`` (the seat's
    branch name by default); the branch. The seat is secured first, since the fetch runs
    ``upload-pack`` there; the user's hooks are off and no tag or FETCH_HEAD is written."""
    secure(seat)
    branch = branch or seat.branch
    _run(
        repo,
        *("-c", "protocol.version=2", "fetch", "--quiet", "--no-tags", "--no-write-fetch-head"),
        *("--recurse-submodules=no", "--no-auto-maintenance", "--end-of-options"),
        str(seat.path),
        f"+{commit}:refs/heads/{branch}",
    )
    landed = _out(repo, "rev-parse", "--verify", f"refs/heads/{branch}^{{commit}}")
    if landed != commit:
        raise GitError(("fetch", branch), repo, 1, f"{branch} is at {landed}, not {commit}")
    return branch


def remove_tree(path: Path) -> folders.Removal:
    """Remove ``path`` and all it holds, at any depth, read-only folders too; symlinks are
    removed, never followed. Never raises: what could not be removed stays, and is returned."""
    return folders.remove_tree(path)


def remove_seats(assay_dir: Path, run_id: str) -> folders.Removal:
    """Remove every seat of a run and their homes (``<assay_dir>/seats/<run>``); what stayed."""
    root = seats_root(assay_dir, run_id)
    removal = remove_tree(root)
    with contextlib.suppress(OSError):
        root.parent.rmdir()  # the last run's seats gone: no empty ``seats/`` left
    return removal


def _remove(path: Path) -> None:
    if not path.exists() and not path.is_symlink():
        raise FileNotFoundError(errno.ENOENT, "no such file", str(path))
    removal = folders.remove_tree(path)
    if not removal.complete:
        raise OSError(removal.summary())


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` as a new file at ``path`` (whatever was there is removed, not written
    through: a link there never carries assay's write elsewhere)."""
    with contextlib.suppress(FileNotFoundError):
        _remove(path)
    _write_new(path, data)


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""
