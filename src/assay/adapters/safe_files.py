"""Reading and writing files where a coder's programs may have been first.

Anything a coder could write is hostile ground for the host: a symlink to the operator's
``~/.bashrc`` or the user's ``.git/config`` under a name assay will use, a FIFO that never
opens, a device, a hard link to a file elsewhere, a file of gigabytes. So:

- :func:`read_limited` reads one file directly inside a folder: never through a link, without
  blocking, a regular file only, at most ``limit`` bytes (or its last ``limit`` bytes).
- :func:`open_reading` opens a file below a folder the same way, for a reader that follows it
  as a program appends to it; :func:`open_regular` opens one at a path the engine names.
- :func:`write_file`, :func:`create_file` and :func:`append_file` write below a folder the
  engine names, opening every folder on the way relative to the one before it, never through
  a link: a link (or any non-folder) where a folder belongs is replaced by a real folder, and
  whatever sits at the file's own place is removed (a folder is moved aside), never followed.
  The named folder itself must be a real folder (not a link): it is the engine's.
- :func:`remove_file` removes a file below a folder without following a link on the way.

Writing is check-then-act, which is sound because every process of the seat has ended before
the host writes in a folder the seat could reach.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# O_NONBLOCK: a FIFO is never waited on (an open for reading returns at once, for writing
# fails with ENXIO); O_DIRECTORY refuses anything but a folder before it is opened.
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
_CREATE = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
FILE_MODE = 0o644
FOLDER_MODE = 0o755


@dataclass(frozen=True)
class LimitedRead:
    """A file's bytes, or ``None`` with a warning saying why it was not read.

    ``data=None, warning=None``: there is no such file (normal, silent).
    """

    data: bytes | None
    warning: str | None = None


# -- reading --------------------------------------------------------------------------------


@contextlib.contextmanager
def open_regular(path: Path) -> Iterator[tuple[BinaryIO, os.stat_result] | None]:
    """``path`` open for reading with its status, when it is a regular file (never through a
    link; a FIFO under its name never holds us up); None when it is not, or is gone."""
    try:
        fd = os.open(path, _READ)
    except OSError:
        yield None
        return
    with os.fdopen(fd, "rb") as source:
        info = os.fstat(source.fileno())
        yield (source, info) if stat.S_ISREG(info.st_mode) else None


def read_limited(path: Path, folder: Path, limit: int, *, tail: bool = False) -> LimitedRead:
    """The bytes of the regular file ``path``, which must sit directly in ``folder``.

    Over ``limit`` bytes it is refused, or with ``tail`` its last ``limit`` bytes are read.
    Pass ``folder`` resolved, as it was before the coder ran: it is compared as given, so a
    folder swapped for a symlink afterwards does not match. Never raises; the warning says
    why a file was refused (``"it is a symbolic link"``).
    """
    try:
        return _read(path, folder, limit, tail)
    except Exception as exc:  # the contract is "never raises", whatever the coder left
        return LimitedRead(None, f"it could not be read ({type(exc).__name__}: {exc})")


def _read(path: Path, folder: Path, limit: int, tail: bool) -> LimitedRead:
    try:
        os.lstat(path)
    except FileNotFoundError:
        return LimitedRead(None)
    # A symlinked parent would let an open of `folder/name` land outside the folder.
    if path.parent.resolve(strict=True) != folder:
        return LimitedRead(None, "it is not inside the run's folder")
    with _opened(folder, _FOLDER) as parent:
        info = os.lstat(path.name, dir_fd=parent)
        if not stat.S_ISREG(info.st_mode):  # refused before any open: a device is never opened
            return LimitedRead(None, f"it is not a regular file ({file_kind(info.st_mode)})")
        try:
            fd = os.open(path.name, _READ, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return LimitedRead(None, "it is a symbolic link")
            if exc.errno == errno.ENOENT:
                return LimitedRead(None)
            return LimitedRead(None, f"it could not be opened ({exc.strerror})")
    try:
        return _read_open(fd, limit, tail)
    finally:
        os.close(fd)


def _read_open(fd: int, limit: int, tail: bool) -> LimitedRead:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # swapped between the look and the open
        return LimitedRead(None, f"it is not a regular file ({file_kind(info.st_mode)})")
    if info.st_nlink > 1:  # a hard link to a file elsewhere (a key, a config) is not the seat's
        return LimitedRead(None, "it is a hard link to another file")
    if info.st_size > limit:
        if not tail:
            return LimitedRead(None, f"it is {info.st_size} bytes, over the {limit} limit")
        os.lseek(fd, info.st_size - limit, os.SEEK_SET)
    data = read_at_most(fd, limit)  # the file may still grow (a process left behind)
    if len(data) > limit:
        if not tail:
            return LimitedRead(None, f"it grew over the {limit} byte limit while read")
        data = data[-limit:]
    return LimitedRead(data)


def open_reading(folder: Path, relative: str | PurePosixPath) -> int | None:
    """``folder/relative`` open for reading (the caller closes it), for a file a program is
    still writing: reached without following a link on the way, a regular file that is not a
    hard link to another. None when there is no such file, or it is anything else."""
    parts = _parts(relative)
    try:
        with _opened(folder, _FOLDER) as top, _walk(top, parts[:-1], make=False) as parent:
            if not stat.S_ISREG(os.lstat(parts[-1], dir_fd=parent).st_mode):
                return None  # a device or FIFO is never opened
            fd = os.open(parts[-1], _READ, dir_fd=parent)
    except OSError:
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        os.close(fd)
        return None
    return fd


def read_at_most(fd: int, limit: int) -> bytes:
    """Read ``fd`` to its end but never more than ``limit + 1`` bytes: a result longer than
    ``limit`` means the file is (or grew) over it, without reading a file that never ends."""
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        chunk = os.read(fd, limit + 1 - total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a file"


def keep_copy(
    source: Path, folder: Path, limit: int, dest: Path, *, tail: bool = False
) -> LimitedRead:
    """Read ``source`` (directly in ``folder``) as :func:`read_limited` does and keep what was
    read at ``dest`` (written by :func:`write_file` in ``dest``'s folder); the read."""
    read = read_limited(source, folder, limit, tail=tail)
    if read.data is not None:
        write_file(dest.parent, dest.name, read.data)
    return read


# -- writing --------------------------------------------------------------------------------


def write_file(folder: Path, relative: str | PurePosixPath, data: bytes | str) -> Path:
    """Write ``data`` (text as UTF-8) at ``folder/relative``, a new file; the path.

    Folders on the way are made (a link or other non-folder there is replaced by one); what
    was at the file's place is removed, never followed. Raises OSError when it cannot write
    (``folder`` missing or itself a link: ELOOP/ENOTDIR).
    """
    view = memoryview(data.encode("utf-8") if isinstance(data, str) else data)
    fd = _create(folder, relative, os.O_WRONLY)
    try:
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    return folder.joinpath(*_parts(relative))


def create_file(path: Path) -> BinaryIO:
    """``path`` as a new, empty file open for writing and reading back (``w+b``), made as
    :func:`write_file` makes its file (``path``'s folder must be a real folder)."""
    fd = _create(path.parent, path.name, os.O_RDWR)
    try:
        return os.fdopen(fd, "w+b")
    except BaseException:
        os.close(fd)
        raise


def append_file(path: Path) -> BinaryIO:
    """``path`` open for appending (made when missing), refused when it is a link or not a
    regular file (``path``'s folder must be a real folder)."""
    with _opened(path.parent, _FOLDER) as parent:
        fd = os.open(path.name, _APPEND, FILE_MODE, dir_fd=parent)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return os.fdopen(fd, "ab")
    except BaseException:
        os.close(fd)
        raise


def remove_file(folder: Path, relative: str | PurePosixPath) -> None:
    """Remove the file (or link) at ``folder/relative`` if there is one; a link or non-folder
    on the way means there is none of ours there, and nothing is removed through it."""
    parts = _parts(relative)
    try:
        with _opened(folder, _FOLDER) as top, _walk(top, parts[:-1], make=False) as parent:
            _clear(parent, parts[-1])
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise


def ensure_folder(folder: Path, relative: str | PurePosixPath) -> Path:
    """``folder/relative`` as a real folder (made as :func:`write_file` makes its folders)."""
    with _opened(folder, _FOLDER) as top, _walk(top, _parts(relative), make=True):
        pass
    return folder.joinpath(*_parts(relative))


def _create(folder: Path, relative: str | PurePosixPath, access: int) -> int:
    """A new file at ``folder/relative`` (see :func:`write_file`), open with ``access``."""
    parts = _parts(relative)
    with _opened(folder, _FOLDER) as top, _walk(top, parts[:-1], make=True) as parent:
        _clear(parent, parts[-1])
        return os.open(parts[-1], access | _CREATE, FILE_MODE, dir_fd=parent)


@contextlib.contextmanager
def _opened(path: Path | str, flags: int, dir_fd: int | None = None) -> Iterator[int]:
    fd = os.open(path, flags, dir_fd=dir_fd)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _walk(top: int, parts: tuple[str, ...], *, make: bool) -> Iterator[int]:
    """The folder ``parts`` below the open folder ``top``, each step opened without following
    a link; with ``make``, a missing step is made and a step that is not a folder replaced."""
    fd = os.dup(top)
    try:
        for part in parts:
            try:
                step = os.open(part, _FOLDER, dir_fd=fd)
            except OSError as exc:
                if not make or exc.errno not in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                    raise
                _clear(fd, part)
                os.mkdir(part, FOLDER_MODE, dir_fd=fd)
                step = os.open(part, _FOLDER, dir_fd=fd)
            os.close(fd)
            fd = step
        yield fd
    finally:
        os.close(fd)


def _clear(parent: int, name: str) -> None:
    """Nothing at ``name`` in the open folder ``parent``: a file or link is unlinked (a link is
    never followed), a folder moved aside under a name of its own (never walked: it may be
    deeper than any recursion)."""
    try:
        info = os.lstat(name, dir_fd=parent)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        aside = f".{name}.displaced-{secrets.token_hex(4)}"
        os.rename(name, aside, src_dir_fd=parent, dst_dir_fd=parent)
    else:
        os.unlink(name, dir_fd=parent)


def _parts(relative: str | PurePosixPath) -> tuple[str, ...]:
    path = PurePosixPath(relative)
    if path.is_absolute() or not path.parts or any(p in (".", "..") for p in path.parts):
        raise ValueError(f"not a relative path of names: {relative!r}")
    return path.parts
