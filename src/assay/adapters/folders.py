"""Folders a coder could have written: removed and walked without recursion or links.

A coder controls the shape of its seat: a folder a thousand levels deep (deeper than the
recursion limit of a recursive walk, than ``PATH_MAX``, than the open-file limit), read-only
folders, symbolic links to the operator's files, FIFOs. :func:`remove_tree` removes such a tree
with one directory open at a time, every step relative to it (a path is never built, so its
length does not matter), climbing back through ``..`` checked against what it came down
through; a link is removed, never followed, and another file system mounted inside is left
alone. It never raises for what it cannot remove: it says what and why.
:func:`walk` lists a tree within a bound of entries and depth, never following a link.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

# What a removal keeps of its failures (the rest is counted): one is enough to act on.
MAX_REPORTED = 20
# How much of a deep path a message shows: its start (the folder being removed) and its end.
_SHOWN_HEAD = 160
_SHOWN_TAIL = 120
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PRIVATE = 0o700

Where = Callable[[], str]  # the path of an entry, built only when a message needs it


@dataclass(frozen=True)
class NotRemoved:
    """One entry a removal left, and why (its path shortened when very deep)."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class Removal:
    """What :func:`remove_tree` could not remove (the first :data:`MAX_REPORTED`, then a count)."""

    path: Path
    left: list[NotRemoved] = field(default_factory=list)
    more: int = 0

    @property
    def complete(self) -> bool:
        return not self.left

    def summary(self) -> str:
        """One line: the first entry left and why, and how many more there are."""
        if not self.left:
            return f"{self.path} was removed"
        others = len(self.left) - 1 + self.more
        tail = f" (and {others} more)" if others else ""
        return f"{self.left[0]}{tail}"

    def _fail(self, where: Where, exc: OSError | str) -> None:
        if len(self.left) >= MAX_REPORTED:
            self.more += 1
            return
        reason = exc if isinstance(exc, str) else (exc.strerror or str(exc))
        self.left.append(NotRemoved(_shorten(where()), reason))


class _Moved(Exception):
    """A folder being removed was moved meanwhile: nothing more is removed."""


@dataclass
class _Level:
    """A folder on the way down: its name in its parent, its identity, the subfolders still to
    remove and whether something below it stayed."""

    name: str
    device: int
    inode: int
    subfolders: list[str] | None = None
    kept: bool = False


def remove_tree(path: Path) -> Removal:
    """Remove ``path`` and everything under it, at any depth; read-only folders are made
    writable first, links and special files are removed (never followed), and a folder of
    another file system mounted below is left. Never raises: returns what stayed and why."""
    path = Path(os.path.abspath(path))
    removal = Removal(path)

    def top() -> str:
        return str(path)

    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return removal
    except OSError as exc:
        removal._fail(top, exc)
        return removal
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        removal._fail(top, exc)
        return removal
    try:
        if stat.S_ISDIR(info.st_mode):
            _remove_folder(parent, path, removal)
        else:
            _writing(parent, lambda: os.unlink(path.name, dir_fd=parent), removal, top)
    finally:
        os.close(parent)
    return removal


def _remove_folder(top_parent: int, path: Path, removal: Removal) -> None:
    """The iterative removal: ``here`` is the one folder open, ``levels`` the way down to it."""
    levels: list[_Level] = []

    def at(name: str) -> Where:
        return lambda: os.path.join(path, *[level.name for level in levels[1:]], name)

    opened = _enter(top_parent, path.name, removal, lambda: str(path))
    if opened is None:
        return
    here, info = opened
    device = info.st_dev
    levels.append(_Level(path.name, info.st_dev, info.st_ino))
    try:
        while levels:
            level = levels[-1]
            if level.subfolders is None:
                level.subfolders, stayed = _clear(here, removal, at)
                level.kept = level.kept or stayed
            if level.subfolders:
                name = level.subfolders.pop()
                opened = _enter(here, name, removal, at(name))
                if opened is None:
                    level.kept = True
                    continue
                below, info = opened
                if info.st_dev != device:  # a mount point: not this tree's to empty
                    os.close(below)
                    removal._fail(at(name), "another file system is mounted here")
                    level.kept = True
                    continue
                os.close(here)
                here = below
                levels.append(_Level(name, info.st_dev, info.st_ino))
                continue
            levels.pop()
            if levels:
                here = _climb(here, levels[-1])
                parent, where = here, at(level.name)
            else:
                os.close(here)
                here, parent, where = -1, top_parent, (lambda: str(path))
            removed = _writing(
                parent, _rmdir(parent, level.name), None if level.kept else removal, where
            )
            if not removed and levels:
                levels[-1].kept = True
    except _Moved:
        removal._fail(lambda: str(path), "a folder was moved while it was being removed")
    finally:
        if here >= 0:
            os.close(here)


def _enter(
    parent: int, name: str, removal: Removal, where: Where
) -> tuple[int, os.stat_result] | None:
    """Open the folder ``name`` of ``parent`` (made readable if it was not), never a link."""
    for attempt in range(2):
        try:
            fd = os.open(name, _OPEN_DIR, dir_fd=parent)
        except PermissionError as exc:
            if attempt or not _make_private(parent, name):
                removal._fail(where, exc)
                return None
            continue
        except OSError as exc:
            removal._fail(where, "a link or not a folder" if exc.errno == errno.ELOOP else exc)
            return None
        return fd, os.fstat(fd)
    return None


def _clear(here: int, removal: Removal, at: Callable[[str], Where]) -> tuple[list[str], bool]:
    """Remove every entry of the open folder ``here`` but its subfolders: (their names,
    whether something stayed)."""
    try:
        # Listed whole before anything is removed: removing while reading a folder may skip.
        with os.scandir(here) as listing:
            entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in listing]
    except OSError as exc:
        removal._fail(at(""), exc)
        return [], True
    folders = []
    stayed = False
    for name, is_dir in entries:
        if is_dir:
            folders.append(name)
        elif not _writing(here, _unlink(here, name), removal, at(name)):
            stayed = True
    return folders, stayed


def _unlink(parent: int, name: str) -> Callable[[], None]:
    return lambda: os.unlink(name, dir_fd=parent)


def _rmdir(parent: int, name: str) -> Callable[[], None]:
    return lambda: os.rmdir(name, dir_fd=parent)


def _writing(
    parent: int, change: Callable[[], None], removal: Removal | None, where: Where
) -> bool:
    """Apply ``change`` to the folder ``parent``, made writable once if it was not; whether it
    is done. A failure is said in ``removal`` (None: something below stayed, so a folder that
    is not empty is no news)."""
    for attempt in range(2):
        try:
            change()
            return True
        except FileNotFoundError:
            return True
        except PermissionError as exc:
            if attempt == 0 and _make_writable(parent):
                continue
            failure: OSError = exc
        except OSError as exc:
            failure = exc
        if removal is not None:
            removal._fail(where, failure)
        return False
    return False


def _make_writable(folder: int) -> bool:
    try:
        os.fchmod(folder, stat.S_IMODE(os.fstat(folder).st_mode) | _PRIVATE)
    except OSError:
        return False
    return True


def _make_private(parent: int, name: str) -> bool:
    """Let the owner list and enter the folder ``name`` of ``parent`` (never through a link)."""
    # Held by a path-only handle, never through a link (a link is left as it is), which needs
    # no permission on the folder itself; changed through the handle's /proc entry.
    try:
        folder = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    except OSError:
        return False
    try:
        os.chmod(f"/proc/self/fd/{folder}", _PRIVATE)
    except OSError:
        return False
    finally:
        os.close(folder)
    return True


def _climb(here: int, level: _Level) -> int:
    """Open the parent of ``here`` through ``..``: it must be the folder we came down from."""
    try:
        up = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=here)
    except OSError as exc:
        raise _Moved from exc
    info = os.fstat(up)
    if (info.st_dev, info.st_ino) != (level.device, level.inode):
        os.close(up)
        raise _Moved
    os.close(here)
    return up


def _shorten(path: str) -> str:
    if len(path) <= _SHOWN_HEAD + _SHOWN_TAIL:
        return path
    hidden = path[_SHOWN_HEAD:-_SHOWN_TAIL].count("/")
    return f"{path[:_SHOWN_HEAD]}…({hidden} more folders)…{path[-_SHOWN_TAIL:]}"


@dataclass(frozen=True)
class Entry:
    """One entry a walk found: its path, how deep (1: in the root itself), its ``lstat``."""

    path: Path
    depth: int
    info: os.stat_result

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.info.st_mode)

    @property
    def is_file(self) -> bool:
        return stat.S_ISREG(self.info.st_mode)


@dataclass
class Walk:
    """The entries under ``root``, folders before what they hold, names in order; a link is an
    entry, never followed. At most ``max_entries`` entries and ``max_depth`` levels are
    listed: what a bound or an unreadable folder left out is said in ``cut``."""

    root: Path
    max_entries: int
    max_depth: int
    skip: Callable[[Entry], bool] | None = None  # an entry neither listed nor looked into
    cut: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator[Entry]:
        self.cut.clear()
        try:
            if not stat.S_ISDIR(os.lstat(self.root).st_mode):
                return
        except OSError as exc:
            self._note(f"{self.root}: {exc.strerror or exc}")
            return
        count = 0
        deepest = False
        pending: list[tuple[Path, int]] = [(self.root, 0)]
        while pending:
            folder, depth = pending.pop()
            if depth >= self.max_depth:
                if not deepest:
                    self._note(f"{folder}: deeper than {self.max_depth} folders, not looked into")
                    deepest = True
                continue
            try:
                with os.scandir(folder) as listing:
                    names = sorted((e.name, e) for e in listing)
                found = [(folder / name, e.stat(follow_symlinks=False)) for name, e in names]
            except OSError as exc:
                self._note(f"{folder}: {exc.strerror or exc}")
                continue
            below = []
            for path, info in found:
                entry = Entry(path, depth + 1, info)
                if self.skip is not None and self.skip(entry):
                    continue
                count += 1
                if count > self.max_entries:
                    self._note(
                        f"{self.root}: more than {self.max_entries} entries, the rest "
                        "was not looked at"
                    )
                    return
                yield entry
                if entry.is_dir:
                    below.append((path, depth + 1))
            pending.extend(reversed(below))

    @property
    def complete(self) -> bool:
        return not self.cut

    def _note(self, why: str) -> None:
        if len(self.cut) < MAX_REPORTED:
            self.cut.append(_shorten(why))


def walk(
    root: Path,
    *,
    max_entries: int,
    max_depth: int,
    skip: Callable[[Entry], bool] | None = None,
) -> Walk:
    """The entries under ``root`` within the bounds (iterate it; see :class:`Walk`)."""
    return Walk(Path(root), max_entries, max_depth, skip)
