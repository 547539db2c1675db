"""The lines a unified diff shows of each new file, read as a stream.

The diff may be a string or lines read one by one from git (a 3-million-line file is never
held whole): :func:`diff_files` yields one :class:`DiffFile` per file, whose lines are read
lazily from the same stream, in batches (:class:`Lines`), so each file's lines must be consumed
before the next file is asked for. Every shown line of the new file comes out, added and
context ones, with its line number; the first shown line of each hunk also says which line of
the base file lies just above it (what the scan reads there, when a changed private key's
header is out of the hunk's sight).

Hunk line counts are followed exactly, so an added line that itself begins with ``++`` is not
mistaken for a file header, and lines are split on ``\\n`` only (a form feed or a lone ``\\r``
inside a line is the line's own).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
BATCH_LINES = 4096
_SHOWN = frozenset({"+", " ", "\n", ""})  # a hunk's added and context lines (an empty one too)


@dataclass
class Lines:
    """Consecutive shown lines of one file (or of the coder's output), by column: one object per
    batch, not per line, so millions of lines cost little more than their text."""

    numbers: list[int] = field(default_factory=list)  # in the new file
    texts: list[str] = field(default_factory=list)
    added: list[bool] = field(default_factory=list)  # False: a context line, unchanged
    # A hunk's first shown line (its index here) -> the base's line number just above it.
    above: dict[int, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.numbers)

    @classmethod
    def of(cls, lines: Iterable[tuple[int, str, bool]]) -> Lines:
        batch = cls()
        for number, text, added in lines:
            batch.numbers.append(number)
            batch.texts.append(text)
            batch.added.append(added)
        return batch


@dataclass(frozen=True)
class DiffFile:
    path: str  # in the candidate
    base_path: str | None  # in the base (a rename's old path); None for a new file
    batches: Iterator[Lines]


def diff_files(diff: Iterable[str]) -> Iterator[DiffFile]:
    """One :class:`DiffFile` per file of ``diff`` that shows lines of a new file (lines with or
    without their ``\\n``)."""
    for (path, base_path), group in itertools.groupby(_batches(diff), key=lambda t: t[:2]):
        yield DiffFile(path, base_path, (batch for _, _, batch in group))


def split_lines(text: str) -> Iterator[str]:
    """The lines of ``text``, split on ``\\n`` only, one at a time."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        if end < 0:
            yield text[start:]
            return
        yield text[start:end]
        start = end + 1


def added_lines(diff: str) -> dict[str, list[tuple[int, str]]]:
    """The added lines of a unified diff, per new path, with their line numbers in the new file."""
    files: dict[str, list[tuple[int, str]]] = {}
    for file in diff_files(split_lines(diff)):
        for batch in file.batches:
            added = [
                (number, text.removesuffix("\n"))
                for number, text, new in zip(batch.numbers, batch.texts, batch.added, strict=True)
                if new
            ]
            if added:
                files.setdefault(file.path, []).extend(added)
    return files


def _batches(diff: Iterable[str]) -> Iterator[tuple[str, str | None, Lines]]:
    """(path, base path, a batch of its shown lines), in the diff's order. One tight loop: it
    runs once per line of the diff (a line keeps its ``\\n`` here; the scan strips it)."""
    path: str | None = None
    base_path: str | None = None
    old_left = new_left = number = 0
    above: int | None = None
    batch = Lines()
    numbers, texts, added = batch.numbers, batch.texts, batch.added
    for line in diff:
        if old_left > 0 or new_left > 0:
            first = line[:1]
            if first in _SHOWN:
                new = first == "+"
                if path is not None:
                    if above is not None:
                        batch.above[len(numbers)] = above
                        above = None
                    numbers.append(number)
                    texts.append(line[1:])
                    added.append(new)
                    if len(numbers) >= BATCH_LINES:
                        yield path, base_path, batch
                        batch = Lines()
                        numbers, texts, added = batch.numbers, batch.texts, batch.added
                number += 1
                new_left -= 1
                if not new:
                    old_left -= 1
                continue
            if first == "-":
                old_left -= 1
                continue
            if first == "\\":
                continue  # "\\ No newline at end of file"
            old_left = new_left = 0  # a hunk shorter than its header said: a header line
        if line.startswith("diff --git "):
            if path is not None and numbers:
                yield path, base_path, batch
            batch = Lines()
            numbers, texts, added = batch.numbers, batch.texts, batch.added
            path = base_path = None
        elif line.startswith("--- "):
            base_path = _path(line[4:])
        elif line.startswith("+++ "):
            path = _path(line[4:])
        elif match := _HUNK.match(line):
            old_start = int(match.group(1))
            old_left = int(match.group(2)) if match.group(2) is not None else 1
            number = int(match.group(3))
            new_left = int(match.group(4)) if match.group(4) is not None else 1
            # The new file's line above the hunk is the base's line above it (or, for a pure
            # insertion, the base line it was inserted after).
            above = old_start if old_left == 0 else old_start - 1
    if path is not None and numbers:
        yield path, base_path, batch


def _path(target: str) -> str | None:
    target = target.rstrip("\n").split("\t", maxsplit=1)[0]
    if target == "/dev/null":
        return None
    path = _unquote(target)
    return path[2:] if path.startswith(("b/", "a/")) else path


def _unquote(path: str) -> str:
    """git quotes unusual paths ("a/caf\\303\\251.txt"); undo its C-style escapes."""
    if len(path) >= 2 and path.startswith('"') and path.endswith('"'):
        raw = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        return raw.encode("latin-1", "replace").decode("utf-8", "replace")
    return path
