"""Read the coder's report file without letting the coder hurt the run.

The coder controls ``$ASSAY_REPORT_PATH``: it can leave a FIFO there (a blocking open would
hang the run outside the coder's timeout), a directory, a symlink to ``/etc/passwd`` or a
file of gigabytes. The report is best-effort evidence (seed 001), so it is read only when it
is a regular file directly inside the seat's folder, opened without following symlinks and
without blocking, and at most :data:`MAX_REPORT_BYTES` long. Any problem discards it with one
warning; nothing here raises.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

MAX_REPORT_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ReportRead:
    """The report's bytes, or ``None`` with a warning saying why it was discarded.

    ``data=None, warning=None``: no report was left (normal, silent).
    """

    data: bytes | None
    warning: str | None = None


def read_report_file(path: Path, folder: Path) -> ReportRead:
    """The bytes of the coder's report at ``path``, which must sit directly in ``folder``.

    Pass ``folder`` already resolved, as it was before the coder ran: it is compared as given,
    so a folder the coder swapped for a symlink afterwards does not match.
    """
    try:
        return _read(path, folder)
    except Exception as exc:  # the contract is "never raises", whatever the coder left
        return _discard(f"it could not be read ({type(exc).__name__}: {exc})")


def _read(path: Path, folder: Path) -> ReportRead:
    try:
        os.lstat(path)
    except FileNotFoundError:
        return ReportRead(None)
    # A symlinked parent would let an open of `folder/report.json` land outside the folder.
    if path.parent.resolve(strict=True) != folder:
        return _discard("it is not inside the run's folder")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return _discard("it is a symbolic link")
        if exc.errno == errno.ENXIO:  # a FIFO with no writer, opened for reading, never is
            return _discard("it is not a regular file")
        if exc.errno == errno.ENOENT:
            return ReportRead(None)
        return _discard(f"it could not be opened ({exc.strerror})")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return _discard(f"it is not a regular file ({_kind(info.st_mode)})")
        if info.st_nlink > 1:  # a hard link to a file elsewhere (a key, a config) is no report
            return _discard("it is a hard link to another file")
        if info.st_size > MAX_REPORT_BYTES:
            return _discard(f"it is {info.st_size} bytes, over the {MAX_REPORT_BYTES} limit")
        # The file may still grow (a coder process left behind).
        data = read_at_most(fd, MAX_REPORT_BYTES)
        if len(data) > MAX_REPORT_BYTES:
            return _discard(f"it grew over the {MAX_REPORT_BYTES} byte limit while read")
        return ReportRead(data)
    finally:
        os.close(fd)


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


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a file"


def _discard(reason: str) -> ReportRead:
    return ReportRead(None, f"coder report discarded: {reason}")
