"""ANSI escape sequences in text a program wrote, made fit for a page: pure functions.

A test runner's output (``pytest --color=yes``), a coder's summary or a hold reason can carry
escape sequences. In a block of output (a validator's output, a log) the colours are kept:
SGR 30-37 and 90-97 (foreground), 39 (default foreground), 1 (bold), 22 and 0 (off) become
``<span class="ansi-…">``; every other sequence (cursor moves, titles, background colours,
256-colour and RGB colours, hyperlinks) is dropped. In one line of text everything is dropped.

What is left goes through :func:`~assay.core.text.shown` (control characters escaped, bidi
overrides shown as ``<U+202E>``) and is HTML-escaped, so the result never holds an ESC, a raw
``<`` of the input, or a tag that is not closed on the line it opens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from markupsafe import Markup, escape

from assay.core.text import shown

# CSI (ESC [ or the 8-bit CSI, parameters, intermediates, a final byte), OSC (ESC ] ... BEL or
# ST, or to the end of the text), DCS/SOS/PM/APC strings, and two-character escapes. An ESC
# that starts none of these is left to ``shown`` (which writes it as ``\x1b``).
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)(?P<params>[0-?]*)(?P<inter>[ -/]*)(?P<final>[@-~])"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*\Z"  # a CSI cut off at the end of the text
    r"|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\|\Z)"
    r"|\x1b[ -/]*[0-~]"
)
_SGR_PARAMS = re.compile(r"[0-9;:]*")
FOREGROUNDS = frozenset([*range(30, 38), *range(90, 98)])


@dataclass(frozen=True)
class Style:
    """What the SGR codes seen so far have set: a foreground colour (its SGR code) and bold."""

    fg: int | None = None
    bold: bool = False

    @property
    def classes(self) -> str:
        return _classes(self.fg, self.bold)


@lru_cache(maxsize=64)
def _classes(fg: int | None, bold: bool) -> str:
    names = []
    if fg is not None:
        names.append(f"ansi-fg-{fg}")
    if bold:
        names.append("ansi-bold")
    return " ".join(names)


PLAIN = Style()


def apply_sgr(style: Style, params: str) -> Style:
    """``style`` after one SGR sequence's parameters (``1;31``; empty is ``0``)."""
    return Style(*_next(style.fg, style.bold, params))


@lru_cache(maxsize=4096)  # a test run's output repeats a few sequences thousands of times
def _next(fg: int | None, bold: bool, params: str) -> tuple[int | None, bool]:
    if not _SGR_PARAMS.fullmatch(params):
        return fg, bold
    codes = [int(p) if p.isdigit() else 0 for p in re.split("[;:]", params)] if params else [0]
    at = 0
    while at < len(codes):
        code = codes[at]
        if code == 0:
            fg, bold = None, False
        elif code == 1:
            bold = True
        elif code == 22:
            bold = False
        elif code in FOREGROUNDS:
            fg = code
        elif code == 39:
            fg = None
        elif code in (38, 48, 58) and at + 1 < len(codes):
            # An extended colour: 5;N or 2;R;G;B follow; not shown, and not read as codes.
            at += 2 if codes[at + 1] == 5 else 4 if codes[at + 1] == 2 else 0
        at += 1
    return fg, bold


def strip(text: str) -> str:
    """``text`` without any escape sequence (for one line: a reason, a title, a file name)."""
    return _SEQUENCE.sub("", text)


# The same sequences over a whole text, each ending at the end of its line as in one line.
_SEQUENCE_LINES = re.compile(
    r"(?:\x1b\[|\x9b)(?P<params>[0-?]*)(?P<inter>[ -/]*)(?P<final>[@-~])"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*$"
    r"|\x1b[\]PX^_][^\x07\x1b\n]*(?:\x07|\x1b\\|$)"
    r"|\x1b[ -/]*[0-~]",
    re.MULTILINE,
)
# Where a colour sequence was, while the rest is escaped in one pass: a printable character
# that escaping leaves alone (a text that holds it takes the slower way, run by run).
MARK = "\U0001d11e"


def _html_run(text: str, classes: str) -> str:
    safe = str(escape(shown(text, lines=True)))
    return f'<span class="{classes}">{safe}</span>' if classes else safe


COLOUR_LIMIT = 1_000_000  # characters: a longer text is shown without its colours


def html_lines(text: str) -> list[Markup]:
    """``text`` as HTML, one item per line, its colours kept across lines (each line's spans
    closed on that line). Past :data:`COLOUR_LIMIT` its escapes are dropped instead: a few MB
    of test output are a few hundred thousand coloured runs, an element each, that take a
    browser many seconds to lay out; as plain lines they open in a few."""
    text = text.replace("\r\n", "\n")
    if len(text) > COLOUR_LIMIT and has_escapes(text):
        text = strip(text)
    if not has_escapes(text):  # the common case: escaped once, then split
        return [Markup(line) for line in str(escape(shown(text, lines=True))).split("\n")]
    if MARK in text:
        return html_lines_by_run(text)
    # A test run's output is thousands of short coloured runs: every colour sequence becomes a
    # mark and every other sequence goes (one split), the text is escaped at once, then each
    # line is cut at its marks.
    pieces = _SEQUENCE_LINES.split(text)  # text, then each sequence's three groups and text
    flat = [pieces[0]]
    colours: list[str] = []
    for k in range(1, len(pieces), 4):
        if pieces[k + 2] == "m" and not pieces[k + 1]:
            colours.append(pieces[k])
            flat.append(MARK)
        flat.append(pieces[k + 3])
    safe = str(escape(shown("".join(flat), lines=True)))
    out: list[Markup] = []
    fg: int | None = None
    bold = False
    classes = ""
    at = 0
    for line in safe.split("\n"):
        if MARK not in line:
            out.append(Markup(_span(line, classes)))
            continue
        first, *rest = line.split(MARK)
        parts = [_span(first, classes)]
        for piece in rest:
            fg, bold = _next(fg, bold, colours[at])
            classes = _classes(fg, bold)
            at += 1
            parts.append(_span(piece, classes))
        out.append(Markup("".join(parts)))
    return out


def _span(safe: str, classes: str) -> str:
    if not safe:
        return ""
    return f'<span class="{classes}">{safe}</span>' if classes else safe


def html_lines_by_run(text: str) -> list[Markup]:
    """:func:`html_lines` one coloured run at a time (``text``'s lines split on ``\\n``)."""
    out: list[Markup] = []
    style = PLAIN
    for line in text.split("\n"):
        parts = []
        at = 0
        for match in _SEQUENCE.finditer(line):
            if match.start() > at:
                parts.append(_html_run(line[at : match.start()], style.classes))
            if match.group("final") == "m" and not match.group("inter"):
                style = apply_sgr(style, match.group("params"))
            at = match.end()
        if at < len(line):
            parts.append(_html_run(line[at:], style.classes))
        out.append(Markup("".join(parts)))
    return out


def to_html(text: str) -> Markup:
    """``text`` as HTML for a ``<pre>``: its colours rendered, everything else escaped."""
    return Markup("\n").join(html_lines(text))


def has_escapes(text: str) -> bool:
    return "\x1b" in text or "\x9b" in text
