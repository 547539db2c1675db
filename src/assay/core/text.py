"""Text from outside (an instruction, a coder's output) made safe to show on a terminal.

An instruction or a coder's error can carry ANSI escapes and control characters that would
recolour, move the cursor or rewrite what the operator sees; a lone surrogate from an argument
that was not UTF-8 cannot be printed at all. These are dropped or escaped before display.
"""

from __future__ import annotations

import re

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


def shown_name(name: str) -> str:
    """A file name as one printable line: every control character escaped, newlines too."""
    return printable(name).replace("\n", "\\n").replace("\t", "\\t")
