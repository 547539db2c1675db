"""Text from outside (an instruction, a coder's output) made safe to show on a terminal.

An instruction or a coder's error can carry ANSI escapes and control characters that would
recolour, move the cursor or rewrite what the operator sees; a lone surrogate from an argument
that was not UTF-8 cannot be printed at all. These are dropped or escaped before display.

:func:`shown` is the one way a name or a text a coder could have chosen (a file name, a report
field, a hold reason, a halt's evidence) is put on a screen: a newline in a file name would
otherwise print a line of its own (``evil\nFAKE  decision: land``), and a bidi override
(U+202E) would show ``txt.exe`` as ``exe.txt``.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import urlsplit

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), and two-character escapes.
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[@-Z\\-_]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` without ANSI escape sequences; other control characters shown as ``\\xNN``;
    lone surrogates as U+FFFD. Newlines and tabs are kept."""
    text = _ANSI.sub("", text.replace("\r\n", "\n"))
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return _SURROGATE.sub("\ufffd", text)


def one_line_title(text: str, limit: int = 80) -> str:
    """A task's title from its instruction: the first non-blank line, printable, at most
    ``limit`` characters (it becomes the subject of the landed commit)."""
    for line in printable(text).splitlines():
        title = " ".join(line.replace("\t", " ").split())
        if title:
            return title[:limit]
    return "(untitled)"


# Shown by code point (``<U+202E>``): invisible characters that reorder, join or break what is
# around them (bidi controls and marks, zero-width characters, line and paragraph separators).
_VISIBLE_CATEGORIES = frozenset({"Cf", "Zl", "Zp"})
_LINE_SHORT = {"\t": "\t", "\r": "\\r"}
_QUOTED_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\", '"': '\\"'}


def shown(text: str, *, lines: bool = False) -> str:
    """``text`` as it may be shown on a screen: every control character (C0, DEL, C1) escaped
    (``\\n``, ``\\x1b``, ``\\u0085``), a lone surrogate escaped (``\\udcff``), and every
    invisible format character (the bidi controls U+202A-U+202E, U+2066-U+2069, U+200E,
    U+200F, U+061C, zero-width characters, U+2028) shown as ``<U+202E>``, as is every
    combining mark past :data:`MAX_MARKS` stacked on one character.

    Text with nothing to escape is returned as it is. Text that needs escaping is put in
    double quotes, with ``\\`` and ``"`` escaped inside (as git quotes a path): so two
    different texts are never shown the same (text that merely looks quoted, ``"a"``, is
    quoted too). ``lines``: for a block shown as lines of its own (a validator's output, a
    diff), where newlines and tabs are kept and nothing is quoted.
    """
    if lines:
        if _STACKED.search(text):
            text = _unstacked_line(text)
        if text.replace("\n", "").replace("\t", "").isprintable():
            return text  # a diff or a test's output: thousands of lines, checked in C
        return "\n".join(map(_shown_line, text.split("\n")))
    excess = _excess_marks(text) if _STACKED.search(text) else set()
    if not excess and text.isprintable() and not _looks_quoted(text):
        return text  # the common case, in one C call
    if not excess and not _looks_quoted(text) and not any(map(_hidden, text)):
        return text  # only other spaces or unassigned characters: nothing is hidden
    out = []
    for at, char in enumerate(text):
        if at in excess:
            out.append(f"<U+{ord(char):04X}>")
        elif char == "<" and text.startswith("U+", at + 1):
            out.append("\\x3c")  # a literal "<U+" cannot pass for a shown character
        else:
            out.append(_escaped(char, _QUOTED_SHORT))
    return '"' + "".join(out) + '"'


def _shown_line(line: str) -> str:
    if line.replace("\t", "").isprintable():
        return line
    return "".join(_escaped(char, _LINE_SHORT) for char in line)


def _looks_quoted(text: str) -> bool:
    return len(text) > 1 and text[0] == '"' == text[-1]


# Combining marks stacked on one character: a language's accents are a few; dozens ("zalgo")
# draw the character hundreds of pixels above and below its line, over the text around it.
# Past MAX_MARKS in a row, each further mark is shown by its code point.
MAX_MARKS = 4
_STACKED = re.compile(
    "[\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0e31-\u0e3a"
    "\u0e47-\u0e4e\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]"
    f"{{{MAX_MARKS + 1},}}"
)


def _excess_marks(text: str) -> set[int]:
    """Where ``text`` holds a combining mark past :data:`MAX_MARKS` in a row."""
    return {at for m in _STACKED.finditer(text) for at in range(m.start() + MAX_MARKS, m.end())}


def _unstacked_line(line: str) -> str:
    return _STACKED.sub(
        lambda m: (
            m.group()[:MAX_MARKS] + "".join(f"<U+{ord(c):04X}>" for c in m.group()[MAX_MARKS:])
        ),
        line,
    )


def _hidden(char: str) -> bool:
    """A character that cannot be shown as itself: a control, a surrogate, an invisible."""
    if char.isprintable():
        return False
    return unicodedata.category(char) in _VISIBLE_CATEGORIES or _control(char)


def _control(char: str) -> bool:
    code = ord(char)
    return code < 0x20 or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xDFFF


def _escaped(char: str, short: dict[str, str]) -> str:
    if char in short:
        return short[char]
    if char.isprintable():
        return char
    code = ord(char)
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    if code <= 0x9F or 0xD800 <= code <= 0xDFFF:
        return f"\\u{code:04x}"
    if unicodedata.category(char) in _VISIBLE_CATEGORIES:
        return f"<U+{code:04X}>"
    return char  # another space, a private-use or unassigned character: shown as it is


_WEB_SCHEMES = frozenset({"http", "https", "ws", "wss"})


def address_shown(url: str) -> str:
    """Where a URL (or a bare ``host:port``) points, fit for an error message: never its
    secrets. A password becomes ``***`` (``postgresql://bob:***@db:5432/assay``); on a web
    URL the whole user part goes, as a token is often put there
    (``https://TOKEN@host``); the query and fragment go too (``?api-key=...``)."""
    text = printable(url.strip())
    try:
        parts = urlsplit(text)
    except ValueError:  # a malformed IPv6 literal: keep the part after any user info
        return text.rpartition("@")[2].split("?")[0].split("#")[0]
    if not parts.scheme or not parts.netloc:
        return text.rpartition("@")[2] if "@" in text.split("/")[0] else text
    userinfo, at, host = parts.netloc.rpartition("@")
    if at:
        user, colon, _ = userinfo.partition(":")
        if parts.scheme.lower() in _WEB_SCHEMES:
            host = "***@" + host
        else:
            host = f"{user}{':***' if colon else ''}@{host}"
    return f"{parts.scheme}://{host}{parts.path}"
