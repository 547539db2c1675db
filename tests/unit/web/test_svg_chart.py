"""The usage page's inline SVG bar charts: the value axis, bars drawn to scale, a day with
nothing a zero-height bar, a partly known figure marked, and labels as text, never markup."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from assay.web.svg_chart import HEIGHT, Bar, Chart, nice_top, render

SVG = "{http://www.w3.org/2000/svg}"


def parsed(chart: Chart) -> ET.Element:
    """The chart as XML (inline SVG must be well formed); the namespace added for the parser."""
    text = str(render(chart, "c")).replace("<svg ", f'<svg xmlns="{SVG[1:-1]}" ', 1)
    return ET.fromstring(text)


def bars(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if "bar" in g.get("class", "").split()]


def heights(bar: ET.Element) -> list[float]:
    return [
        float(r.get("height", "0")) for r in bar.iter(f"{SVG}rect") if "part" in r.get("class", "")
    ]


@pytest.mark.parametrize(
    ("value", "top"),
    [
        (0, 1.0),
        (-3, 1.0),
        (0.7, 1.0),
        (1, 1.0),
        (1.01, 2.0),
        (3, 5.0),
        (7, 10.0),
        (0.0123, 0.02),
        (12_345, 20_000.0),
        (2**62, 5e18),
        (1e308, 1e308),
        (9e307, 1e308),
        (1.7e308, 1.7e308),  # 2 x 1e308 is past a float: the value itself
        (float("inf"), 1.0),
        (float("nan"), 1.0),
    ],
)
def test_the_value_axis_tops_at_a_round_number(value: float, top: float) -> None:
    assert nice_top(value) == pytest.approx(top)


def test_bars_are_drawn_to_scale_and_stacked() -> None:
    chart = Chart(
        "Runs", ("spent", "refunded"), [Bar("a", (2, 1)), Bar("b", (4, 0)), Bar("c", (0, 0))]
    )
    root = parsed(chart)
    assert root.get("data-top") == "5.0"
    a, b, c = (heights(g) for g in bars(root))
    assert a[0] == pytest.approx(2 * a[1]) and b[0] == pytest.approx(2 * a[0])
    assert b[1] == 0 and c == [0, 0]  # a day with nothing: zero-height bars, still there
    assert sum(a) / sum(b) == pytest.approx(3 / 4)
    # The value axis says its top and its half, as the chart's format writes them.
    ticks = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "tick"]
    assert ticks == ["2", "5"]
    assert [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "legend"] == [
        "spent",
        "refunded",
    ]


def test_nothing_to_draw_says_so() -> None:
    root = parsed(Chart("Cost", ("cost",), []))
    assert bars(root) == []
    assert [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "empty"] == [
        "nothing in this range"
    ]
    assert root.find(f"{SVG}title") is not None


def test_one_bar_fills_the_axis() -> None:
    (bar,) = bars(parsed(Chart("Tokens", ("t",), [Bar("12-01", (1000.0,))])))
    (height,) = heights(bar)
    assert 0 < height < HEIGHT and bar.get("data-label") == "12-01"


def test_huge_values_stay_in_the_chart() -> None:
    chart = Chart(
        "Tokens", ("t",), [Bar("big", (1e300,)), Bar("small", (1.0,)), Bar("inf", (float("inf"),))]
    )
    big, small, inf = (heights(b)[0] for b in bars(parsed(chart)))
    assert 0 < big < HEIGHT and 0 <= small < 1e-6 and inf == 0
    wide = Chart("Tokens", ("t",), [Bar("big", (1e300,))], horizontal=True)
    (rect,) = (r for r in parsed(wide).iter(f"{SVG}rect") if "part" in r.get("class", ""))
    assert 0 < float(rect.get("width", "0")) < 720


def test_a_partly_known_figure_is_marked_not_read_as_whole() -> None:
    chart = Chart(
        "Cost",
        ("known",),
        [
            Bar("11-30", (0.5,)),
            Bar("12-01", (0.25,), unknown=3, note="12-01: ≥ $0.25 (3 unknown)"),
            Bar("12-02", (0.0,), unknown=1),
        ],
    )
    known, partial, unknown_only = bars(parsed(chart))
    assert "partial" not in known.get("class", "") and known.get("data-unknown") is None
    for bar, count in ((partial, "3"), (unknown_only, "1")):
        assert "partial" in bar.get("class", "").split() and bar.get("data-unknown") == count
        marks = [r for r in bar.iter(f"{SVG}rect") if r.get("class") == "unknown-mark"]
        assert len(marks) == 1
        assert [t.text for t in bar.iter(f"{SVG}text")] == ["?"]
    assert partial.findtext(f"{SVG}title") == "12-01: ≥ $0.25 (3 unknown)"
    assert unknown_only.findtext(f"{SVG}title") == "12-02: known 0 (at least: 1 unknown)"
    # A row chart writes the figure with a "+?": more was spent than it shows.
    rows = parsed(
        Chart(
            "Cost", ("known",), [Bar("llm", (0.25,), unknown=1)], lambda v: f"${v}", horizontal=True
        )
    )
    assert [t.text for t in rows.iter(f"{SVG}text") if t.get("class") == "figure"] == ["$0.25 +?"]


def test_labels_and_titles_are_text_never_markup() -> None:
    hostile = '</text><script>alert(1)</script>"\u202e&'
    chart = Chart(f"Cost <b>{hostile}", ("a", hostile), [Bar(hostile, (1.0, 2.0))], horizontal=True)
    text = str(render(chart, 'c"><script>'))
    assert "<script>" not in text and "\u202e" not in text and "<b>" not in text
    root = parsed(chart)  # well formed: nothing broke out of its element
    (bar,) = bars(root)
    assert bar.get("data-label", "").startswith('"</text><script>alert(1)</script>\\"<U+202E>&')
    drawn = [t.text or "" for t in root.iter(f"{SVG}text") if t.get("class") == "label"]
    assert drawn == ['"</text><script>alert(1…']  # cut: the figures table has it whole
    assert re.search(r"<title[^>]*>&#34;Cost &lt;b&gt;", text)
