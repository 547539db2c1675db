"""How the dashboard writes times, money, token counts, durations, diffs and names.

Jinja filters, pure functions of their input (``now`` is passed in by tests; pages use the
clock at render time). ``None`` always means unknown and reads as a dash, never as zero.

Jinja escapes HTML, not control characters or bidi overrides: a file name with U+202E reads
backwards, one with a newline reads as two words. Every name and text a coder could have
chosen (file names, findings, reasons, evidence, summaries, output) goes through ``shown``
(one line) or ``shown_lines`` (a block that keeps its lines) first.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from markupsafe import Markup, escape

from assay.core.text import shown
from assay.core.usage import Spend
from assay.web import ansi

UNKNOWN = "—"


Moment = datetime | str | None  # a halt state file keeps its times as ISO text


def _aware(moment: datetime) -> datetime:
    # The store hands back aware UTC times; a naive one (an older SQLite row) is UTC too.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _moment(value: Moment) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    try:
        return _aware(datetime.fromisoformat(value.strip().replace("Z", "+00:00")))
    except ValueError:
        return None


def when(moment: Moment) -> str:
    """An absolute time as an operator reads it: ``2026-12-02 05:31:07 UTC`` (text that is no
    time is shown as it is)."""
    parsed = _moment(moment)
    if parsed is None:
        return str(moment) if moment else UNKNOWN
    return f"{_aware(parsed).astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def _span(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86_400:
        hours, rest = divmod(seconds, 3600)
        return f"{hours} h {rest // 60} min" if hours < 6 and rest >= 60 else f"{hours} h"
    days, rest = divmod(seconds, 86_400)
    return f"{days} d {rest // 3600} h" if days < 3 and rest >= 3600 else f"{days} d"


def ago(value: Moment, now: datetime | None = None) -> str:
    """How far ``moment`` is from now: ``3 min ago``, ``in 2 h``, ``just now``."""
    moment = _moment(value)
    if moment is None:
        return str(value) if value else UNKNOWN
    now = _aware(now) if now is not None else datetime.now(UTC)
    delta = int((_aware(moment) - now).total_seconds())
    if abs(delta) < 5:
        return "just now"
    return f"in {_span(delta)}" if delta > 0 else f"{_span(-delta)} ago"


def timetag(value: Moment, now: datetime | None = None) -> Markup:
    """``<time>`` reading relative, the absolute time in its title and ``datetime``."""
    moment = _moment(value)
    if moment is None:
        return Markup('<span class="muted">{}</span>').format(value or UNKNOWN)
    # Plain formatting (every part is digits, words and punctuation of our own): a queue
    # page has hundreds of these.
    iso = _aware(moment).astimezone(UTC).isoformat()
    return Markup(f'<time datetime="{iso}" title="{when(moment)}">{ago(moment, now)}</time>')


def since(value: Moment, now: datetime | None = None) -> Markup:
    """How long something has been running since ``value``, as :func:`duration` writes it, in
    an element whose ``data-since`` lets ``clock.js`` keep it ticking in the browser."""
    moment = _moment(value)
    if moment is None:
        return Markup('<span class="muted">{}</span>').format(value or UNKNOWN)
    start = _aware(moment).astimezone(UTC)
    shown = elapsed(start, _aware(now) if now is not None else datetime.now(UTC))
    iso = start.isoformat(timespec="milliseconds")
    return Markup(
        f'<span class="elapsed" data-since="{iso}" title="since {when(start)}">{shown}</span>'
    )


def usd(value: float | None) -> str:
    """Dollars: ``$1.23``; below a dollar four decimals (``$0.0123``), so cents of a cheap
    model are not all ``$0.00``."""
    if value is None:
        return UNKNOWN
    if value == 0:
        return "$0.00"
    if abs(value) < 1:
        return f"${value:.4f}"
    return f"${value:,.2f}"


def spend_cost(spend: Spend) -> str:
    """What dispatches cost: the sum when every one reported a cost, ``≥ $0.0123`` (the known
    part) when some did not, a dash when none did."""
    if spend.cost_usd is not None:
        return usd(spend.cost_usd)
    return f"≥ {usd(spend.priced_cost_usd)}" if spend.priced_cost_usd > 0 else UNKNOWN


def unknown_costs(spend: Spend) -> str:
    """The dispatches without a known cost, counted ("" when every cost is known)."""
    if spend.cost_usd is not None:
        return ""
    parts = []
    if spend.unpriced:
        parts.append(f"{spend.unpriced} reported tokens but no cost")
    if spend.unreported:
        parts.append(f"{spend.unreported} reported no usage")
    unknown = spend.unpriced + spend.unreported
    return f"cost unknown for {unknown} of {spend.dispatches} dispatches: {', '.join(parts)}"


def tokens(value: int | None) -> str:
    """A token count: ``950``, ``12.3k``, ``4.1M``."""
    if value is None:
        return UNKNOWN
    if value < 1000:
        return str(value)
    if value < 1_000_000:
        return f"{value / 1000:.1f}k".replace(".0k", "k")
    return f"{value / 1_000_000:.1f}M".replace(".0M", "M")


def duration(ms: int | None) -> str:
    """A wall time in milliseconds: ``450 ms``, ``4.2 s``, ``42 s``, ``1 m 03 s``, ``2 h 05 m``."""
    if ms is None:
        return UNKNOWN
    if ms < 1000:
        return f"{ms} ms"
    if ms < 10_000:
        return f"{ms / 1000:.1f} s"
    seconds = ms // 1000
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} m {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} m"


def elapsed(start: datetime | None, end: datetime | None) -> str:
    """How long from ``start`` to ``end``, as :func:`duration` writes it."""
    if start is None or end is None:
        return UNKNOWN
    return duration(max(0, int((_aware(end) - _aware(start)).total_seconds() * 1000)))


def shorten(text: str | None, limit: int = 120) -> str:
    """``text`` on one line, cut at a word boundary with an ellipsis past ``limit``."""
    flat = " ".join((text or "").split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit].rsplit(" ", 1)[0] if " " in flat[:limit] else flat[:limit]
    return cut.rstrip(" ,;:") + " …"


def shown_text(value: object) -> str:
    """A name or a text as :func:`~assay.core.text.shown` shows it, on one line, its ANSI
    escape sequences dropped; ``None`` is empty (a template's ``dash`` then reads it as
    unknown)."""
    return "" if value is None else shown(ansi.strip(str(value)))


def shown_lines(value: object) -> str:
    """A block (a validator's output, an instruction) with its lines kept, its ANSI escape
    sequences dropped, every other control and bidi character shown."""
    return "" if value is None else shown(ansi.strip(str(value)), lines=True)


def ansi_html(value: object) -> Markup:
    """A block of a program's output as HTML for a ``<pre>``: its ANSI colours rendered,
    everything else escaped (:mod:`assay.web.ansi`)."""
    return Markup("") if value is None else ansi.to_html(str(value))


LINE_LIMIT = 240  # characters of a one-line text (a reason, evidence) a page shows at first
BLOCK_LIMIT = 4000  # characters of a block (a summary, a validator's output) shown at first
FULL_LIMIT = 64 * 1024  # what a page holds of a text at all; the rest is behind a link


@dataclass(frozen=True)
class Clip:
    """The start of a text a page shows (``head``), whether that is all of it, and its size."""

    head: str
    cut: bool
    size: int


def clip(value: object, limit: int = LINE_LIMIT) -> Clip:
    """At most ``limit`` characters of ``value`` (a cut is made on a line or a space near the
    limit when there is one), so a 1 MB summary or a 60 KB word is sent as a readable start."""
    text = "" if value is None else str(value)
    if len(text) <= limit:
        return Clip(text, False, len(text))
    head = text[:limit]
    for mark in ("\n", " "):
        at = head.rfind(mark)
        if at > limit * 3 // 4:
            head = head[:at]
            break
    return Clip(head, True, len(text))


def line(value: object, limit: int = LINE_LIMIT) -> str:
    """``value``'s start on one line, as :func:`shown_text` shows it, with ``…`` when cut: for
    a text that must stay plain (a link's label, a page's ``<title>``), where
    ``line_text`` cannot put its "show all"."""
    c = clip(value, limit)
    return shown_text(c.head) + (" …" if c.cut else "")


def size_text(chars: int) -> str:
    """A length as a reader weighs it: ``812 characters``, ``60 KB``, ``1.0 MB``."""
    if chars < 1000:
        return f"{chars} characters"
    if chars < 1_000_000:
        return f"{chars / 1000:.0f} KB"
    return f"{chars / 1_000_000:.1f} MB"


LINK_SCHEMES = frozenset({"http", "https"})


def http_url(value: object) -> str | None:
    """``value`` when it is an absolute http(s) URL a link may point to, else None (a
    ``javascript:``, ``data:`` or ``vbscript:`` URL, a relative one, one with a control
    character or a space: then the page shows it as text)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or len(text) > 2048 or not text.isprintable() or " " in text:
        return None
    scheme, colon, rest = text.partition(":")
    if not colon or scheme.lower() not in LINK_SCHEMES or not rest.startswith("//"):
        return None
    if len(rest) < 3 or rest[2] in "/\\":
        return None  # no host
    return text


def slug(value: object) -> str:
    """A status or state as a CSS class suffix: ``not viable`` → ``not-viable``."""
    text = str(value).strip().lower()
    return "".join(c if c.isalnum() else "-" for c in text) or "unknown"


class DiffLine(StrEnum):
    """What a line of a unified diff is, as a CSS class."""

    FILE = "file"  # diff --git / index / --- / +++
    HUNK = "hunk"
    ADD = "add"
    DEL = "del"
    CONTEXT = "ctx"


@dataclass(frozen=True)
class ColouredLine:
    kind: DiffLine
    text: str


def _kinds(diff: str | None) -> Iterator[tuple[DiffLine, str]]:
    """Each line of a unified diff with what it is. A file's header runs from ``diff --git``
    to its first ``@@``; inside a hunk a removed line that reads ``--- x`` is a removal."""
    in_hunk = False
    for text in (diff or "").splitlines():
        first = text[:1]
        if in_hunk and first == "+":
            yield DiffLine.ADD, text
        elif in_hunk and first == "-":
            yield DiffLine.DEL, text
        elif text.startswith("@@"):
            in_hunk = True
            yield DiffLine.HUNK, text
        elif text.startswith("diff --git"):
            in_hunk = False
            yield DiffLine.FILE, text
        else:
            yield (DiffLine.CONTEXT if in_hunk else DiffLine.FILE), text


def diff_lines(diff: str | None) -> list[ColouredLine]:
    """A unified diff, line by line, with what each line is (coloured server-side: no JS)."""
    return [ColouredLine(kind, text) for kind, text in _kinds(diff)]


def diff_html(diff: str | None) -> Markup:
    """The diff as escaped spans, one per line, for a ``<pre>`` (each span a block, so no
    newline between them: it would show as a blank line). A bidi override in a changed line
    (a "Trojan Source" edit) is shown as ``<U+202E>``, not obeyed.

    Escaped once as a whole, then split: escaping leaves newlines and the markers a line is
    told by (``+ - @ d``) alone, and a 512 KiB diff is thousands of lines, where a
    ``Markup.format`` per line cost more than the rest of the run page."""
    escaped = str(escape(_cut_lines(shown(diff or "", lines=True))))
    if _CUT in escaped:
        escaped = _CUT_AT.sub(_cut_note, escaped)
    return Markup(
        "".join(f'<span class="d-{kind}">{text}</span>' for kind, text in _kinds(escaped))
    )


DIFF_LINE_LIMIT = 2000  # characters of one diff line shown (a minified file is one 200 KB line)
_CUT = "\x00"  # never in a shown text (a NUL is written \x00 there); escaping leaves it
_CUT_AT = re.compile("\x00([0-9]+)\x00")


def _cut_lines(text: str) -> str:
    """``text`` with every line past :data:`DIFF_LINE_LIMIT` cut, its rest counted (a browser
    takes seconds to lay out and paint a line a million pixels wide)."""
    if len(text) <= DIFF_LINE_LIMIT:
        return text
    lines = text.split("\n")
    if all(len(line) <= DIFF_LINE_LIMIT for line in lines):
        return text
    return "\n".join(
        line
        if len(line) <= DIFF_LINE_LIMIT
        else f"{line[:DIFF_LINE_LIMIT]}{_CUT}{len(line) - DIFF_LINE_LIMIT}{_CUT}"
        for line in lines
    )


def _cut_note(match: re.Match[str]) -> str:
    return f'<em class="d-cut"> … {size_text(int(match.group(1)))} more on this line</em>'


FILTERS = {
    "when": when,
    "ago": ago,
    "timetag": timetag,
    "usd": usd,
    "spend_cost": spend_cost,
    "unknown_costs": unknown_costs,
    "tokens": tokens,
    "duration": duration,
    "elapsed": elapsed,
    "since": since,
    "slug": slug,
    "http_url": http_url,
    "shorten": shorten,
    "shown": shown_text,
    "shown_lines": shown_lines,
    "diff_html": diff_html,
    "ansi": ansi_html,
    "clip": clip,
    "line": line,
    "size_text": size_text,
}
