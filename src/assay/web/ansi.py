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
from collections.abc import Iterator
from dataclasses import dataclass

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
        names = []
        if self.fg is not None:
            names.append(f"ansi-fg-{self.fg}")
        if self.bold:
            names.append("ansi-bold")
        return " ".join(names)


PLAIN = Style()


def apply_sgr(style: Style, params: str) -> Style:
    """``style`` after one SGR sequence's parameters (``1;31``; empty is ``0``)."""
    if not _SGR_PARAMS.fullmatch(params):
        return style
    codes = [int(p) if p.isdigit() else 0 for p in re.split("[;:]", params)] if params else [0]
    fg, bold = style.fg, style.bold
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
    return Style(fg, bold)


def strip(text: str) -> str:
    """``text`` without any escape sequence (for one line: a reason, a title, a file name)."""
    return _SEQUENCE.sub("", text)


def _pieces(line: str, style: Style) -> Iterator[tuple[str, Style]]:
    """The line's text runs with the style each is shown in; the last item's style is the one
    the line ends with (its text may be empty)."""
    at = 0
    for match in _SEQUENCE.finditer(line):
        if match.start() > at:
            yield line[at : match.start()], style
        if match.group("final") == "m" and not match.group("inter"):
            style = apply_sgr(style, match.group("params"))
        at = match.end()
    yield line[at:], style


def _html_run(text: str, style: Style) -> str:
    if not text:
        return ""
    safe = str(escape(shown(text, lines=True)))
    return f'<span class="{style.classes}">{safe}</span>' if style != PLAIN else safe


def html_lines(text: str) -> list[Markup]:
    """``text`` as HTML, one item per line, its colours kept across lines (each line's spans
    closed on that line)."""
    text = text.replace("\r\n", "\n")
    if not has_escapes(text):  # the common case: escaped once, then split
        return [Markup(line) for line in str(escape(shown(text, lines=True))).split("\n")]
    out: list[Markup] = []
    style = PLAIN
    for line in text.split("\n"):
        parts = []
        for run, run_style in _pieces(line, style):
            parts.append(_html_run(run, run_style))
            style = run_style
        out.append(Markup("".join(parts)))
    return out


def to_html(text: str) -> Markup:
    """``text`` as HTML for a ``<pre>``: its colours rendered, everything else escaped."""
    return Markup("\n").join(html_lines(text))


def has_escapes(text: str) -> bool:
    return "\x1b" in text or "\x9b" in text
