"""ANSI output made fit for a page: colours kept in blocks, everything else dropped or escaped."""

from __future__ import annotations

import re
from html import unescape

from hypothesis import given, settings
from hypothesis import strategies as st

from assay.web import ansi

ESC = "\x1b"
PYTEST = f"{ESC}[1m{ESC}[31mE       assert 1 == 2{ESC}[0m\n{ESC}[32m1 passed{ESC}[39;49;00m"

# Text that is mostly escape sequences, their pieces and markup-like characters.
_PIECES = st.sampled_from(
    [
        ESC,
        "\x9b",
        "[",
        "]",
        "m",
        ";",
        "1",
        "31",
        "38;5;196",
        "0",
        "\x07",
        "\\",
        "<",
        ">",
        "&",
        '"',
        "\n",
        "\r",
        "\u202e",
        "\x00",
        "<span>",
        "</span>",
        "a",
        " ",
    ]
)
HOSTILE = st.lists(st.one_of(_PIECES, st.text(max_size=4)), max_size=40).map("".join)
_TAG = re.compile(r"<(/?)([a-z]+)[^>]*>")


def _balanced(html: str) -> bool:
    depth = 0
    for closing, name in _TAG.findall(html):
        assert name == "span", html
        depth += -1 if closing else 1
        if depth < 0:
            return False
    return depth == 0


@settings(max_examples=400)
@given(HOSTILE)
def test_a_block_never_holds_an_escape_or_an_unbalanced_tag(text: str) -> None:
    lines = ansi.html_lines(text)
    for line in lines:
        assert ESC not in line and "\x9b" not in line
        assert "\u202e" not in line and "\x00" not in line
        assert _balanced(str(line)), line
    assert len(lines) == text.replace("\r\n", "\n").count("\n") + 1


@settings(max_examples=400)
@given(HOSTILE)
def test_every_character_of_the_input_markup_is_escaped(text: str) -> None:
    html = str(ansi.to_html(text))
    # Removing our own spans leaves no tag at all: every <, > and & of the text is escaped.
    bare = _TAG.sub("", html)
    assert "<" not in bare and ">" not in bare
    assert ESC not in unescape(bare)


@given(HOSTILE)
def test_a_stripped_line_holds_no_sequence(text: str) -> None:
    stripped = ansi.strip(text)
    assert not re.search(r"\x1b\[[0-?]*[ -/]*[@-~]", stripped)
    assert ansi.strip(stripped) == stripped or ESC in text or "\x9b" in text


def test_pytest_colours_are_rendered() -> None:
    lines = ansi.html_lines(PYTEST)
    assert str(lines[0]) == '<span class="ansi-fg-31 ansi-bold">E       assert 1 == 2</span>'
    assert str(lines[1]) == '<span class="ansi-fg-32">1 passed</span>'


def test_a_colour_carries_over_lines_and_each_line_closes_its_span() -> None:
    lines = ansi.html_lines(f"{ESC}[91mred\nstill red{ESC}[39m plain")
    assert str(lines[0]) == '<span class="ansi-fg-91">red</span>'
    assert str(lines[1]) == '<span class="ansi-fg-91">still red</span> plain'


def test_other_sequences_are_dropped() -> None:
    text = f"{ESC}]0;title{ESC}\\{ESC}[2J{ESC}[H{ESC}[41mbg{ESC}[38;5;31mx{ESC}[38;2;1;2;3my"
    assert str(ansi.to_html(text)) == "bgxy"


def test_extended_colour_arguments_are_not_read_as_codes() -> None:
    # 38;5;1 is colour 1 of 256, not "bold"; 38;2;31;32;33 is RGB, not red.
    assert ansi.apply_sgr(ansi.PLAIN, "38;5;1") == ansi.PLAIN
    assert ansi.apply_sgr(ansi.PLAIN, "38;2;31;32;33") == ansi.PLAIN
    assert ansi.apply_sgr(ansi.PLAIN, "1;38;5;9;33") == ansi.Style(fg=33, bold=True)


def test_reset_and_bold_off() -> None:
    style = ansi.apply_sgr(ansi.PLAIN, "1;34")
    assert style == ansi.Style(fg=34, bold=True)
    assert ansi.apply_sgr(style, "22") == ansi.Style(fg=34)
    assert ansi.apply_sgr(style, "") == ansi.PLAIN
    assert ansi.apply_sgr(style, "0") == ansi.PLAIN


def test_html_in_a_log_is_text() -> None:
    assert str(ansi.to_html(f"<script>{ESC}[31m&</script>")) == (
        '&lt;script&gt;<span class="ansi-fg-31">&amp;&lt;/script&gt;</span>'
    )


def test_controls_and_bidi_are_shown() -> None:
    assert str(ansi.to_html("a\u202eb\x00c")) == "a&lt;U+202E&gt;b\\x00c"
    assert str(ansi.to_html(f"x{ESC}")) == "x\\x1b"


def test_strip_for_one_line() -> None:
    assert ansi.strip(f"{ESC}[1m{ESC}[31mE boom{ESC}[39;49;00m") == "E boom"
    assert ansi.strip("plain") == "plain"


@settings(max_examples=400)
@given(HOSTILE)
def test_the_one_pass_rendering_is_the_run_by_run_one(text: str) -> None:
    """Colours marked and the text escaped at once, as a long log is: the same HTML as each
    run escaped on its own (the way a text holding the mark character still takes)."""
    assert ansi.html_lines(text) == ansi.html_lines_by_run(text.replace("\r\n", "\n"))


def test_a_text_holding_the_mark_is_rendered_run_by_run() -> None:
    text = f"{ESC}[31mred{ansi.MARK}{ESC}[0m plain"
    assert str(ansi.to_html(text)) == f'<span class="ansi-fg-31">red{ansi.MARK}</span> plain'


def test_a_text_past_the_colour_limit_is_shown_plain() -> None:
    line = f"{ESC}[33mwarn{ESC}[0m <b>x</b>\n"
    small = ansi.to_html(line * 10)
    big = ansi.to_html(line * (ansi.COLOUR_LIMIT // len(line) + 1))
    assert 'class="ansi-fg-33"' in small
    assert "span" not in big and ESC not in big and "[33m" not in big
    assert big.startswith("warn &lt;b&gt;x&lt;/b&gt;\nwarn")
