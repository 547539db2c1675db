"""Which lines of a chunk a detect-secrets plugin must read: its gate.

A gate lets through a superset of the lines the plugin could find anything on, at a fraction of
the plugin's cost: first the lines holding one of its needles (plain text searches, at C speed;
case-insensitive ones in a lowercased copy of the chunk), then those a shape of its value
matches, then those its own patterns match (run once over the lines joined), then, for the
entropy plugins, those holding a quoted string of enough entropy. A line that is not ASCII
passes every case-insensitive step unread: case folding there is not ASCII's.

Every step only ever drops lines the plugin would find nothing on (tests compare a gated scan
with every plugin reading every line, and check each needle and shape against what each
plugin finds), so the scan's findings are exactly the plugins' own.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

_SMALL = 4096  # characters: a chunk this small goes straight to the patterns


@dataclass(frozen=True)
class Gate:
    """Which lines a plugin could find something on, at a fraction of the plugin's cost."""

    patterns: tuple[re.Pattern[str], ...]  # a line must match one (compiled re.MULTILINE)
    needles: tuple[str, ...] = ()  # ... and first hold one of these, as written,
    folded: tuple[str, ...] = ()  # or one of these in any case (or be not ASCII),
    shapes: tuple[re.Pattern[str], ...] = ()  # then match one of these (or be not ASCII),
    lowered: bool = False  # the patterns are lowercase, for the lowercased line (or not ASCII)
    line_check: Callable[[str], bool] | None = None  # ... and at last pass this


class _Lowered:
    """A chunk lowercased, for case-insensitive searches at plain-text speed. Its lines that are
    not ASCII are blanked and named instead: case folding there is not ASCII's (the long s,
    U+017F, is an ``s`` to a case-insensitive pattern), so a gate lets them through unread."""

    def __init__(self, texts: list[str], joined: str, starts: list[int]) -> None:
        if joined.isascii():
            self.joined, self.starts, self.other = joined.lower(), starts, set[int]()
            self.texts: list[str] | None = None  # split on demand
        else:
            self.texts = [t.lower() if t.isascii() else "" for t in texts]
            self.joined, self.starts = "\n".join(self.texts), line_starts(self.texts)
            self.other = {i for i, t in enumerate(texts) if not t.isascii()}

    def line(self, index: int) -> str:
        if self.texts is not None:
            return self.texts[index]
        end = self.starts[index + 1] - 1 if index + 1 < len(self.starts) else len(self.joined)
        return self.joined[self.starts[index] : end]


class Chunk:
    """A chunk's lines, joined once, with the plain-text searches its gates share."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.joined = "\n".join(texts)
        self.starts = line_starts(texts)
        self._found: dict[tuple[str, bool], set[int]] = {}
        self._lowered: _Lowered | None = None

    @property
    def lowered(self) -> _Lowered:
        if self._lowered is None:
            self._lowered = _Lowered(self.texts, self.joined, self.starts)
        return self._lowered

    def gated(self, gate: Gate) -> list[int]:
        """The lines of this chunk that ``gate`` lets through."""
        lines: list[int] | None = None  # None: every line
        small = len(self.joined) < _SMALL  # the steps before the patterns cost more than they save
        if (gate.needles or gate.folded) and not small:
            held: set[int] = set()
            for needle in gate.needles:
                held |= self._holding(needle, folded=False)
            for needle in gate.folded:
                held |= self._holding(needle, folded=True)
            if gate.folded:
                held |= self.lowered.other
            lines = sorted(held)
        if gate.shapes and not small:
            shaped = self._matching(gate.shapes, lines) | self.lowered.other
            lines = sorted(shaped if lines is None else shaped.intersection(lines))
        found = self._matching(gate.patterns, lines, lowered=gate.lowered)
        if gate.lowered:
            other = self.lowered.other
            found |= other if lines is None else other.intersection(lines)
        matched = sorted(found)
        if gate.line_check is None:
            return matched
        return [i for i in matched if gate.line_check(self.texts[i])]

    def _matching(
        self, patterns: Sequence[re.Pattern[str]], lines: list[int] | None, *, lowered: bool = False
    ) -> set[int]:
        """Which of ``lines`` (None: all) some match of ``patterns`` lies on (in the lowercased
        chunk, when ``lowered``)."""
        if lines is None:
            if lowered:
                return touched(patterns, self.lowered.joined, self.lowered.starts)
            return touched(patterns, self.joined, self.starts)
        if not lines:
            return set()
        sub = [self.lowered.line(i) if lowered else self.texts[i] for i in lines]
        return {lines[i] for i in touched(patterns, "\n".join(sub), line_starts(sub))}

    def _holding(self, needle: str, *, folded: bool) -> set[int]:
        key = (needle, folded)
        if key not in self._found:
            text, starts = (
                (self.lowered.joined, self.lowered.starts) if folded else (self.joined, self.starts)
            )
            lines: set[int] = set()
            at = text.find(needle)
            while at >= 0:
                index = bisect.bisect_right(starts, at) - 1
                lines.add(index)
                # On to the next line: one hit a line is enough.
                at = text.find(needle, starts[index + 1] if index + 1 < len(starts) else len(text))
            self._found[key] = lines
        return self._found[key]


def line_starts(texts: Sequence[str]) -> list[int]:
    """Where each of ``texts`` starts in ``"\\n".join(texts)``."""
    lengths = itertools.accumulate(map(len, texts), initial=0)
    return list(map(operator.add, lengths, range(len(texts))))


def touched(gate: Sequence[re.Pattern[str]], joined: str, starts: list[int]) -> set[int]:
    """The lines some match of ``gate`` lies on (all of them, when it spans several)."""
    lines: set[int] = set()
    for pattern in gate:
        if pattern.search(joined) is None:  # the usual case: one call, no iterator
            continue
        for match in pattern.finditer(joined):
            first = bisect.bisect_right(starts, match.start()) - 1
            last = bisect.bisect_right(starts, max(match.end() - 1, match.start())) - 1
            lines.update(range(first, last + 1))
    return lines
