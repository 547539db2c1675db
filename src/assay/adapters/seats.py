"""Seat repositories: each seat dispatch works in a git repository of its own, made afresh.

A seat is ``<assay_dir>/seats/<run>/seat-N``: a fresh ``git init`` whose object store borrows
the user's (and the run's candidate store) through ``objects/info/alternates`` (read-only,
nothing copied), with the commit the dispatch starts on checked out on the branch
``assay/<run>/seat-N``, and a private home beside it. Both are made again for every dispatch,
so nothing one dispatch left (a planted link, a hook, a replace ref) is there for the next.

The host runs git in a seat only here: while making it, before any sandboxed process has
touched it, and when resetting it for a command validator (:func:`reset_seat`), once every
process that wrote it has ended, its ``.git`` removed unread and made anew first. What the
coder wrote leaves the seat once, as a tree captured inside its sandbox
(:mod:`assay.adapters.capture`); nothing of the seat's ``.git`` is ever read by the host.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from assay.adapters import folders
from assay.adapters.git import ASSAY_EMAIL, ASSAY_NAME, ATTRIBUTES, GitError, _out, _run

_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Seat:
    """One seat's repository and its private home."""

    path: Path
    home: Path
    branch: str

    @property
    def git_dir(self) -> Path:
        return self.path / ".git"


def seats_root(assay_dir: Path, run_id: str) -> Path:
    """Every seat of a run (and their homes): ``<assay_dir>/seats/<run>``."""
    return assay_dir / "seats" / run_id


def seat_path(assay_dir: Path, run_id: str, seat: int | str) -> Path:
    """Where one seat works: ``<assay_dir>/seats/<run>/<seat>``."""
    return seats_root(assay_dir, run_id) / str(seat)


def seat_outputs(assay_dir: Path, run_id: str, seat: int) -> Path:
    """Where a seat's programs write, one fresh folder per dispatch (``attempt-N.…``)."""
    return seats_root(assay_dir, run_id) / f"seat-{seat}.out"


def seat_home(path: Path) -> Path:
    """A seat's private ``$HOME``, beside its repository (``seat-N.home``)."""
    return path.with_name(path.name + ".home")


def object_stores(repo: Path) -> tuple[Path, ...]:
    """The user's object store and those it borrows in turn (its own alternates): what a seat
    reads, read-only. The first is the one a seat's alternates name."""
    common = Path(_layout(repo)[0])
    store = (common if common.is_absolute() else repo / common).resolve() / "objects"
    found = [store]
    for raw in _read(store / "info" / "alternates").decode(errors="replace").splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            other = Path(line) if Path(line).is_absolute() else store / line
            if other.resolve().is_dir():
                found.append(other.resolve())
    return tuple(found)


def object_format(repo: Path) -> str:
    """The user's repository's object format (``sha1``, ``sha256``): it never changes."""
    return _layout(repo)[1]


@functools.cache
def _layout(repo: Path) -> tuple[str, str]:
    """(its common git directory as git names it, its object format), asked of git once per
    process: neither changes while the repository lives."""
    common, fmt = _out(repo, "rev-parse", "--git-common-dir", "--show-object-format").split("\n")
    return common, fmt


def create_seat(
    repo: Path,
    path: Path,
    base_commit: str,
    branch: str,
    *,
    store: Path | None = None,
    borrows: Sequence[Path] = (),
) -> Seat:
    """A repository at ``path`` with ``base_commit`` checked out on ``branch``, its objects
    borrowed from ``repo``'s store (and ``borrows``: the run's candidate store), and its
    private home beside it, both made afresh. The checkout holds exactly the tree's bytes:
    no attribute of the tree converts line endings or runs a filter."""
    store = store or object_stores(repo)[0]
    home = seat_home(path)
    for old in (path, home):  # what an earlier dispatch (or a run that died) left: afresh
        if old.exists() or old.is_symlink():
            remove_tree(old)
    path.parent.mkdir(parents=True, exist_ok=True)
    home.mkdir()
    seat = Seat(path=path, home=home, branch=branch)
    _init_git(repo, seat, base_commit, store, borrows)
    _run(path, "read-tree", "--reset", "-u", "HEAD")
    return seat


def _init_git(repo: Path, seat: Seat, commit: str, store: Path, borrows: Sequence[Path]) -> None:
    """A new repository at the seat's path (its ``.git`` absent): ``commit`` on its branch,
    its objects borrowed, its index not yet written."""
    # No template: no sample hooks, nothing assay did not write. The object format follows
    # the user's repository (a sha256 repository's objects are no use to a sha1 one).
    fmt = object_format(repo)
    _run(
        seat.path.parent,
        *("init", "--quiet", "--template=", f"--object-format={fmt}"),
        *("--initial-branch", seat.branch, str(seat.path)),
    )
    git_dir = seat.git_dir
    (git_dir / "hooks").mkdir()
    # A coder's own commits need an identity (its $HOME holds no git config) and no signing.
    with (git_dir / "config").open("a", encoding="utf-8") as config:
        config.write(f"[user]\n\tname = {ASSAY_NAME}\n\temail = {ASSAY_EMAIL}\n")
        config.write("[commit]\n\tgpgSign = false\n")
    alternates = "".join(f"{place}\n" for place in (store, *borrows)).encode()
    _write_new(git_dir / "objects" / "info" / "alternates", alternates)
    (git_dir / "info").mkdir()
    # Every file checked out with exactly its blob's bytes, whatever the tree's attributes say.
    _write_new(git_dir / "info" / "attributes", ATTRIBUTES.encode())
    shallow = _read(store.parent / "shallow") or None  # a shallow clone's seat is shallow too
    if shallow is not None:
        _write_new(git_dir / "shallow", shallow)
    _point_branch(git_dir, seat.branch, commit)


def keep_index(seat: Seat, kept: Path) -> None:
    """Keep the index of a seat just made (or just reset), where no sandbox can write: what
    :func:`reset_seat` trusts later. Its time is kept too (git's racy-entry check reads it)."""
    shutil.copy2(seat.git_dir / "index", kept)


def reset_seat(
    repo: Path,
    seat: Seat,
    commit: str,
    kept_index: Path,
    *,
    store: Path,
    borrows: Sequence[Path] = (),
) -> bool:
    """Make ``seat``'s work tree hold exactly ``commit``'s tree again, in place, once every
    process that wrote it has ended: what a fresh checkout holds, at the cost of what changed.

    Its ``.git`` is removed unread and made anew with ``kept_index``, the index kept when
    the seat was last made or reset (:func:`keep_index`); every entry whose name the tree
    does not hold is removed (never followed), and every file changed since that index was
    written (:func:`_prune`); each folder kept is made as a fresh one is; then git checks out
    each file the kept index does not vouch for (stat data and ctime, which no sandboxed
    process can set back: ``git reset --hard``'s test). False when any step fails: the caller
    makes a fresh checkout instead."""
    try:
        if seat.path.is_symlink() or not seat.path.is_dir():
            return False
        since = os.stat(kept_index).st_mtime_ns  # when git wrote it, kept by keep_index
        if not remove_tree(seat.git_dir).complete:
            return False
        _init_git(repo, seat, commit, store, borrows)
        shutil.copy2(kept_index, seat.git_dir / "index")
        listed = _run(seat.path, "ls-tree", "-r", "-z", "--name-only", commit).stdout
        names = {os.fsdecode(n) for n in listed.split(b"\0") if n}
        if not _prune(seat.path, names, since, _folder_mode(kept_index.parent)):
            return False
        _run(seat.path, "read-tree", "--reset", "-u", "HEAD")
        keep_index(seat, kept_index)
    except (OSError, GitError):
        return False
    return True


def _parents(name: str) -> list[str]:
    parts = name.split("/")[:-1]
    return ["/".join(parts[: n + 1]) for n in range(len(parts))]


def _prune(root: Path, names: set[str], since: int, mode: int) -> bool:
    """Remove under ``root`` every entry the tree does not name, and every file it names whose
    ctime (set by any change, of its bytes, bits, links or attributes, and never set back) is
    not older than ``since``, or that has another name: git writes those again. Git's own check
    compares whole seconds of ctime (as most builds do), and bytes only within the index's
    second: a chmod, a hard link, an ACL made the second the seat was made passes it. Each
    folder kept gets :func:`_fresh_folder`. One folder open at a time, no recursion (a tree may
    be deeper than Python's limit); True when all went."""
    held = {p for name in names for p in _parents(name)}
    pending = [""]
    while pending:
        rel = pending.pop()
        fd = os.open(root / rel if rel else root, _OPEN_DIR)  # never through a link
        try:
            _fresh_folder(fd, mode)
            for entry in list(os.scandir(fd)):
                name = f"{rel}/{entry.name}" if rel else entry.name
                if name == ".git":
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if name in held:
                        pending.append(name)
                    elif not remove_tree(root / name).complete:
                        return False
                    continue
                info = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
                if name not in names or info.st_ctime_ns >= since or info.st_nlink != 1:
                    os.unlink(entry.name, dir_fd=fd)
        finally:
            os.close(fd)
    return True


def _fresh_folder(fd: int, mode: int) -> None:
    """Make the folder ``fd`` what a fresh one is: no ACL (a default ACL gives the files git
    writes in it other bits) or user attribute, its permission bits ``mode``."""
    try:
        attributes = os.listxattr(fd)
    except OSError as exc:  # a file system without them: nothing to remove
        if exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
        attributes = []
    for attribute in attributes:
        if attribute.startswith(("user.", "system.posix_acl_")):
            os.removexattr(fd, attribute)
    if stat.S_IMODE(os.fstat(fd).st_mode) != mode:
        os.fchmod(fd, mode)


@functools.cache
def _folder_mode(beside: Path) -> int:
    """The permission bits of a folder made in ``beside`` (the umask's): what a fresh checkout
    there makes its folders with (writable by their owner, or git could not write them).
    Asked once per folder: every check of a run resets its seat."""
    probe = Path(tempfile.mkdtemp(dir=beside))
    try:
        (probe / "folder").mkdir()
        return stat.S_IMODE((probe / "folder").stat().st_mode) | 0o700
    finally:
        remove_tree(probe)


def _point_branch(git_dir: Path, branch: str, commit: str) -> None:
    """The new repository's ``branch`` at ``commit``. Its loose ref is written as git writes
    one, in a repository no one else has seen yet: one git process fewer, and no reflog
    folders to make and remove again; ``update-ref`` where refs are not files (reftable) or
    ``commit`` is not a full id (git checks the name and the object; ``read-tree`` checks the
    object of a written id next)."""
    heads = git_dir / "refs" / "heads"
    full_id = len(commit) in (40, 64) and all(c in "0123456789abcdef" for c in commit)
    if full_id and heads.is_dir() and not (git_dir / "reftable").exists():
        ref = heads / branch
        ref.parent.mkdir(parents=True, exist_ok=True)
        _write_new(ref, f"{commit}\n".encode())
        return
    _run(git_dir.parent, "update-ref", f"refs/heads/{branch}", commit)


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


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""
