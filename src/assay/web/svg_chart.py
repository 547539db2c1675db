"""Bar charts as inline SVG, rendered on the server: no script, no chart library, no build.

A chart is a title, the names of its stacked series and its bars; each bar is a label (a day,
a coder's name: untrusted text, shown through :func:`assay.web.format.shown_text` and escaped)
and one value per series. A bar whose figure is only partly known (costs nobody reported) is
drawn to its known part and marked above with a dashed cap and a ``?``: a lower bound, never
read as the whole. The SVG has a ``<title>`` and every bar one too, for a screen reader and a
hover; the page puts the figures beside it as a table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from assay.web.format import line, shown_text

__all__ = ["Bar", "Chart", "nice_top", "render"]

WIDTH = 720.0
HEIGHT = 220.0
LEFT = 64.0  # the value axis's labels
BOTTOM = 26.0  # the bars' labels
TOP = 18.0  # room for the unknown marks
ROW = 24.0  # a horizontal chart's bar
NAME_WIDTH = 170.0  # a horizontal chart's labels
LABEL_LIMIT = 24  # characters of a label drawn (the table has it whole)
# Characters of a name in a bar's tooltip and data: a coder's or model's name is anyone's
# text, and each bar repeats it.
NAME_LIMIT = 200
MAX_LABELS = 12  # labels along a vertical chart's axis; the rest are in each bar's title


@dataclass(frozen=True)
class Bar:
    """One bar: its ``label``, one value per series (stacked, each at least 0), how many of
    the things it sums have no known value (``unknown``: the bar is a lower bound), and what
    its hover says (``note``; the label and the values when empty)."""

    label: str
    values: tuple[float, ...]
    unknown: int = 0
    note: str = ""

    @property
    def total(self) -> float:
        return sum(v for v in self.values if math.isfinite(v) and v > 0)


@dataclass(frozen=True)
class Chart:
    title: str
    series: tuple[str, ...]
    bars: Sequence[Bar]
    fmt: Callable[[float], str] = lambda v: f"{v:,.0f}"
    horizontal: bool = False  # one row per bar (coders); else one column per bar (days)


def nice_top(value: float) -> float:
    """The top of a value axis that holds ``value``: 1, 2 or 5 times a power of ten (1 when
    there is nothing to hold, ``value`` itself past what a float can round up to)."""
    if not math.isfinite(value) or value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 5.0, 10.0):
        top = step * power
        if top >= value * (1 - 1e-12):
            return top if math.isfinite(top) else value
    return value


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _text(value: str, limit: int = LABEL_LIMIT) -> str:
    """A label as it may be drawn: shown (controls, bidi overrides visible) and cut."""
    shown = shown_text(value)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _title(bar: Bar, chart: Chart) -> str:
    if bar.note:
        return line(bar.note, NAME_LIMIT)
    parts = [
        f"{line(name, NAME_LIMIT)} {chart.fmt(v)}"
        for name, v in zip(chart.series, bar.values, strict=False)
    ]
    more = f" (at least: {bar.unknown} unknown)" if bar.unknown else ""
    return f"{line(bar.label, NAME_LIMIT)}: {', '.join(parts)}{more}"


def render(chart: Chart, ident: str) -> Markup:
    """The chart as an ``<svg>`` element (``ident``: a page-unique id for its title)."""
    top = nice_top(max((b.total for b in chart.bars), default=0.0))
    inner = _rows(chart, top) if chart.horizontal else _columns(chart, top)
    height = TOP + max(1, len(chart.bars)) * ROW + 8 if chart.horizontal else HEIGHT
    legend = _legend(chart) if len(chart.series) > 1 else ""
    empty = (
        f'<text class="empty" x="{WIDTH / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle">'
        "nothing in this range</text>"
        if not chart.bars
        else ""
    )
    return Markup(
        f'<svg class="chart" viewBox="0 0 {WIDTH:.0f} {height:.0f}" role="img" '
        f'aria-labelledby="{escape(ident)}-title" data-top="{top!r}">'
        f'<title id="{escape(ident)}-title">{escape(shown_text(chart.title))}</title>'
        f"{legend}{inner}{empty}</svg>"
    )


def _legend(chart: Chart) -> str:
    items = []
    x = LEFT
    for n, name in enumerate(chart.series):
        label = escape(_text(name))
        items.append(
            f'<rect class="part s{n}" x="{x:.0f}" y="2" width="10" height="10"/>'
            f'<text class="legend" x="{x + 14:.0f}" y="11">{label}</text>'
        )
        x += 24 + 7 * len(str(label))
    return "".join(items)


def _columns(chart: Chart, top: float) -> str:
    """One column per bar (days), the value axis on the left."""
    plot_h = HEIGHT - TOP - BOTTOM
    plot_w = WIDTH - LEFT - 8
    base = TOP + plot_h
    out = [_axis_line(LEFT, base, WIDTH - 8, base)]
    for frac in (0.5, 1.0):
        y = base - plot_h * frac
        out.append(
            f'<line class="grid" x1="{LEFT:.0f}" y1="{y:.1f}" x2="{WIDTH - 8:.0f}" y2="{y:.1f}"/>'
            f'<text class="tick" x="{LEFT - 4:.0f}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(chart.fmt(top * frac))}</text>"
        )
    n = max(1, len(chart.bars))
    slot = plot_w / n
    width = max(1.0, slot * 0.72)
    every = math.ceil(n / MAX_LABELS)
    for i, bar in enumerate(chart.bars):
        x = LEFT + i * slot + (slot - width) / 2
        parts, y = _stack(bar, top, plot_h, base, x, width)
        label = ""
        if i % every == 0:
            label = (
                f'<text class="label" x="{x + width / 2:.1f}" y="{HEIGHT - 8:.0f}" '
                f'text-anchor="middle">{escape(_text(bar.label, 12))}</text>'
            )
        mark = _unknown_mark(bar, x, y - 12, width, 10)
        out.append(_bar(bar, chart, parts + mark) + label)
    return "".join(out)


def _rows(chart: Chart, top: float) -> str:
    """One row per bar (coders), the labels on the left and each bar's figure at its end."""
    plot_w = WIDTH - NAME_WIDTH - 110
    out = []
    for i, bar in enumerate(chart.bars):
        y = TOP + i * ROW
        x = NAME_WIDTH
        parts = []
        for n, value in enumerate(bar.values):
            w = _length(value, top, plot_w)
            parts.append(
                f'<rect class="part s{n}" x="{x:.1f}" y="{y + 4:.1f}" width="{_num(w)}" '
                f'height="{ROW - 8:.0f}"/>'
            )
            x += w
        mark = _unknown_mark(bar, x + 2, y + 4, 10, ROW - 8)
        figure = chart.fmt(bar.total) + (" +?" if bar.unknown else "")
        end = x + (16 if bar.unknown else 4)
        out.append(
            _bar(bar, chart, "".join(parts) + mark)
            + f'<text class="label" x="{NAME_WIDTH - 6:.0f}" y="{y + ROW / 2 + 4:.1f}" '
            f'text-anchor="end">{escape(_text(bar.label))}</text>'
            + f'<text class="figure" x="{end:.1f}" y="{y + ROW / 2 + 4:.1f}">'
            f"{escape(figure)}</text>"
        )
    return "".join(out)


def _length(value: float, top: float, span: float) -> float:
    if not math.isfinite(value) or value <= 0:
        return 0.0
    return min(span, value / top * span)


def _stack(
    bar: Bar, top: float, plot_h: float, base: float, x: float, width: float
) -> tuple[str, float]:
    """A column's stacked parts, and the y of its top."""
    parts = []
    y = base
    for n, value in enumerate(bar.values):
        h = _length(value, top, plot_h)
        y -= h
        parts.append(
            f'<rect class="part s{n}" x="{x:.1f}" y="{y:.1f}" width="{_num(width)}" '
            f'height="{_num(h)}"/>'
        )
    return "".join(parts), y


def _unknown_mark(bar: Bar, x: float, y: float, width: float, height: float) -> str:
    if not bar.unknown:
        return ""
    return (
        f'<rect class="unknown-mark" x="{x:.1f}" y="{y:.1f}" width="{_num(width)}" '
        f'height="{_num(height)}"/>'
        f'<text class="unknown-q" x="{x + width / 2:.1f}" y="{y + height - 1:.1f}" '
        f'text-anchor="middle">?</text>'
    )


def _bar(bar: Bar, chart: Chart, inner: str) -> str:
    unknown = f' data-unknown="{bar.unknown}"' if bar.unknown else ""
    values = " ".join(repr(float(v)) for v in bar.values)
    label = escape(line(bar.label, NAME_LIMIT))
    return (
        f'<g class="bar{" partial" if bar.unknown else ""}" data-label="{label}" '
        f'data-values="{values}"{unknown}><title>{escape(_title(bar, chart))}</title>{inner}</g>'
    )


def _axis_line(x1: float, y1: float, x2: float, y2: float) -> str:
    return f'<line class="axis" x1="{x1:.0f}" y1="{y1:.1f}" x2="{x2:.0f}" y2="{y2:.1f}"/>'
