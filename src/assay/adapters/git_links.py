"""The symlinks of a tree, read from git's blobs: what a link says, never where it leads here.

The scope check judges a candidate's links by their text (:mod:`assay.core.links`); reading
them from the candidate's and the base commit's trees means no link is ever followed here.
It also asks which of a change's gitlinks (nested repositories) the base already has.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from assay.adapters.git import _run, _text

_LINK_MODE = "120000"
_GITLINK_MODE = "160000"


def symlinks_at(repo: Path, commit: str) -> dict[str, str]:
    """Every symlink of ``commit``'s tree: path -> target."""
    raw = _text(_run(repo, "ls-tree", "-r", "-z", "--full-tree", commit).stdout)
    entries = []
    for record in raw.split("\0"):
        meta, _, path = record.partition("\t")
        fields = meta.split(" ")
        if len(fields) == 3 and fields[0] == _LINK_MODE:
            entries.append((path, fields[2]))
    return _link_targets(repo, entries)


def gitlinks_at(repo: Path, commit: str, paths: Sequence[str]) -> set[str]:
    """Which of ``paths`` are gitlinks in ``commit``'s tree (read from the tree, so nothing of
    a nested repository is opened)."""
    if not paths:
        return set()
    raw = _text(_run(repo, "ls-tree", "-r", "-z", "--full-tree", commit, "--", *paths).stdout)
    found = set()
    for record in raw.split("\0"):
        meta, _, path = record.partition("\t")
        if meta.split(" ")[0] == _GITLINK_MODE:
            found.add(path)
    return found & set(paths)


def _link_targets(repo: Path, entries: Sequence[tuple[str, str]]) -> dict[str, str]:
    if not entries:
        return {}
    feed = "".join(f"{sha}\n" for _, sha in entries).encode()
    out = _run(repo, "cat-file", "--batch", feed=feed).stdout
    targets: dict[str, str] = {}
    at = 0
    for path, _sha in entries:
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split(b" ")[2])
        targets[path] = _text(out[header_end + 1 : header_end + 1 + size])
        at = header_end + 1 + size + 1  # the content, then a newline
    return targets
