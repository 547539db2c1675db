"""A plain text table: whole cells when piped, the wide columns cut to a terminal's width.

Tables are read by people and by ``grep``/``awk``/``cut``: one row per line, columns two
spaces apart, no box drawing and no colour. Piped, nothing is ever cut (an id cut short cannot
be pasted back). On a terminal the columns named ``shrink`` give way, longest first, so a row
fits the window; the others (ids, statuses) stay whole.
"""

from __future__ import annotations

import os
import sys
import unicodedata
from collections.abc import Sequence

from assay.core.text import shown

GAP = "  "
_MIN_SHRUNK = 8
_FIRST_ODD = "\u0300"  # below it every character takes one column


def render(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    shrink: Sequence[int] = (),
    width: int | None = None,
) -> str:
    """The table as text, a newline after each line. ``width``: the most columns a line may
    take (None: no limit); only the columns at the indexes in ``shrink`` are cut to fit."""
    # Column by column: a list of 10,000 tasks is 50,000 cells.
    if rows:
        by_column = zip(headers, zip(*rows, strict=True), strict=True)
        columns = [[_cell(h), *map(_cell, column)] for h, column in by_column]
    else:
        columns = [[_cell(h)] for h in headers]
    sizes = [list(map(cell_width, column)) for column in columns]
    widths = [max(size) for size in sizes]
    if width is not None:
        widths = _fit(widths, shrink, width)
        columns = [[_cut(c, w) for c in column] for column, w in zip(columns, widths, strict=True)]
        sizes = [list(map(cell_width, column)) for column in columns]
    padded = [
        [c + " " * (w - n) for c, n in zip(column, size, strict=True)]
        for column, size, w in zip(columns[:-1], sizes, widths, strict=False)  # all but the last
    ]
    lines = zip(*padded, columns[-1], strict=True)
    return "".join(GAP.join(line).rstrip() + "\n" for line in lines)


def terminal_width() -> int | None:
    """The terminal's width when stdout is one, else None (piped: never cut)."""
    if not sys.stdout.isatty():
        return None
    try:  # as shutil.get_terminal_size reads it, without importing shutil's archivers
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except OSError:
        return 80


def cell_width(text: str) -> int:
    """Columns ``text`` takes on a terminal: wide (East Asian) characters take two,
    combining marks none."""
    if text.isascii():
        return len(text)
    # Below U+0300 every character takes one column: look up only the others (a character
    # class over that range costs milliseconds to compile, on every start).
    return len(text) + sum(_char_width(c) - 1 for c in text if c >= _FIRST_ODD)


def _char_width(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def _cell(value: str) -> str:
    """One line of text as :func:`~assay.core.text.shown` shows it: a cell holds no newline,
    tab, control or bidi character, nor a run of spaces (columns are two spaces apart)."""
    if value.isprintable() and "  " not in value and value[:1] != " " and value[-1:] != " ":
        return value  # already so (isprintable: no control, escape or other space)
    return " ".join(shown(value).split())


def _fit(widths: list[int], shrink: Sequence[int], width: int) -> list[int]:
    fitted = list(widths)
    excess = sum(fitted) + len(GAP) * (len(fitted) - 1) - width
    while excess > 0:
        wide = [i for i in shrink if fitted[i] > _MIN_SHRUNK]
        if not wide:
            break
        widest = max(wide, key=lambda i: fitted[i])
        others = max([fitted[i] for i in wide if i != widest] + [_MIN_SHRUNK])
        step = min(excess, fitted[widest] - max(others, _MIN_SHRUNK)) or 1
        fitted[widest] -= step
        excess -= step
    return fitted


def _cut(text: str, width: int) -> str:
    if cell_width(text) <= width:
        return text
    kept, used = [], 0
    for char in text:
        taken = _char_width(char)
        if used + taken > width - 1:
            break
        kept.append(char)
        used += taken
    return "".join(kept) + "…"
