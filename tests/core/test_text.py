"""Text from outside made safe to show: no escape sequence or control character survives."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from assay.core.text import one_line_title, printable

_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def test_escape_sequences_are_dropped_and_controls_shown() -> None:
    assert printable("a\x1b[31mred\x1b[0m \x1b]0;title\x07b\x07") == "ared b\\x07"
    assert printable("x\udcffy\r\nz\tw") == "x\ufffdy\nz\tw"


def test_a_title_is_the_first_non_blank_printable_line() -> None:
    assert one_line_title("\n \x1b[2J fix\tthe\x00  bug\r\nmore") == "fix the\\x00 bug"
    assert one_line_title("\x1b[2J\n") == "(untitled)"
    assert one_line_title("a" * 200, 80) == "a" * 80


@given(st.text())
def test_nothing_unsafe_survives(text: str) -> None:
    shown = printable(text)
    assert _UNSAFE.search(shown) is None
    shown.encode("utf-8")
    title = one_line_title(text)
    assert "\n" not in title and _UNSAFE.search(title) is None and 0 < len(title) <= 80
