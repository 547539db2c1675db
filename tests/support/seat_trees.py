"""What a seat's work tree holds, entry by entry, and a change no stat check should miss:
the seat-reset tests compare a reset seat with a fresh checkout through these."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def listing(root: Path) -> dict[str, object]:
    """Every entry under ``root`` but its ``.git``, never following a link: a link's target;
    a file's bytes, permission bits and number of names; a folder's permission bits. Walked
    without recursion (a tree may be deeper than Python's limit)."""
    found: dict[str, object] = {}
    pending = [p for p in root.iterdir() if p.name != ".git"]
    while pending:
        path = pending.pop()
        info = path.lstat()
        rel = path.relative_to(root).as_posix()
        if stat.S_ISLNK(info.st_mode):
            found[rel] = ("link", os.readlink(path))
        elif stat.S_ISDIR(info.st_mode):
            found[rel] = ("folder", oct(stat.S_IMODE(info.st_mode)))
            pending.extend(path.iterdir())
        elif stat.S_ISREG(info.st_mode):
            found[rel] = (path.read_bytes(), oct(stat.S_IMODE(info.st_mode)), info.st_nlink)
        else:
            found[rel] = "special"
    return dict(sorted(found.items()))


def forge(path: Path, text: bytes) -> None:
    """Change a file's bytes keeping its size and its times (all a process can set back)."""
    before = path.stat()
    assert len(text) == before.st_size
    path.write_bytes(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
