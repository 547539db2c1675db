"""The plain table behind ``assay task list``: whole cells when piped, only the columns that may
shrink cut on a narrow terminal, one line per row whatever the cells hold."""

from __future__ import annotations

from assay.cli.table import cell_width, render

HEADERS = ("id", "status", "title")
ROWS = [["t-" + "a" * 40, "queued", "réparer le 漢字 bug " * 4], ["t-b", "held", "short"]]


def test_piped_every_cell_is_whole_and_aligned() -> None:
    lines = render(HEADERS, ROWS).splitlines()
    assert lines[1].startswith("t-" + "a" * 40 + "  queued  réparer")
    assert lines[1].endswith("bug")  # whole, trailing spaces stripped
    assert lines[2].index("held") == lines[1].index("queued") == lines[0].index("status") == 44
    assert lines[0].split() == list(HEADERS)


def test_on_a_narrow_terminal_only_the_shrinkable_columns_are_cut() -> None:
    lines = render(HEADERS, ROWS, shrink=(2,), width=70).splitlines()
    assert all(cell_width(line) <= 70 for line in lines), lines
    assert lines[1].startswith("t-" + "a" * 40 + "  queued  ") and lines[1].endswith("…")
    assert "t-b" in lines[2] and lines[2].endswith("short")


def test_a_cell_is_one_line_with_its_controls_and_bidi_shown() -> None:
    text = render(HEADERS, [["t-x", "held", "two\nlines\tand \x1b[31mred\u202e  x"]])
    assert text.splitlines()[1] == 't-x  held    "two\\nlines\\tand \\x1b[31mred<U+202E> x"'
    assert len(text.splitlines()) == 2
    assert (
        render(HEADERS, [["t-y", "queued", " spaced  out "]])
        .splitlines()[1]
        .endswith("queued  spaced out")
    )
    assert render(HEADERS, []) == "id  status  title\n"


def test_wide_characters_take_two_columns() -> None:
    assert (cell_width("漢字"), cell_width("e\u0301"), cell_width("ü✓")) == (4, 1, 2)
