"""The dashboard's filters: times, money, tokens, durations and diff colouring."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from assay.web.format import (
    DiffLine,
    ago,
    diff_html,
    diff_lines,
    duration,
    elapsed,
    http_url,
    shorten,
    slug,
    timetag,
    tokens,
    usd,
    when,
)

NOW = datetime(2026, 12, 2, 5, 31, 7, tzinfo=UTC)


def test_when_is_utc_to_the_second() -> None:
    assert when(NOW) == "2026-12-02 05:31:07 UTC"
    plus_one = NOW.astimezone(timezone(timedelta(hours=1)))
    assert when(plus_one) == "2026-12-02 05:31:07 UTC"
    assert when(NOW.replace(tzinfo=None)) == "2026-12-02 05:31:07 UTC"  # naive is UTC
    assert when(None) == "—"


def test_ago_reads_past_and_future() -> None:
    assert ago(NOW - timedelta(seconds=2), NOW) == "just now"
    assert ago(NOW - timedelta(seconds=42), NOW) == "42 s ago"
    assert ago(NOW - timedelta(minutes=3, seconds=20), NOW) == "3 min ago"
    assert ago(NOW + timedelta(hours=2), NOW) == "in 2 h"
    assert ago(NOW - timedelta(hours=1, minutes=5), NOW) == "1 h 5 min ago"
    assert ago(NOW - timedelta(days=1, hours=3), NOW) == "1 d 3 h ago"
    assert ago(NOW - timedelta(days=40), NOW) == "40 d ago"
    assert ago(None, NOW) == "—"


def test_timetag_carries_the_absolute_time() -> None:
    html = str(timetag(NOW - timedelta(minutes=3), NOW))
    assert html == (
        '<time datetime="2026-12-02T05:28:07+00:00" title="2026-12-02 05:28:07 UTC">'
        "3 min ago</time>"
    )
    assert "—" in str(timetag(None))


def test_usd_tokens_and_duration() -> None:
    assert usd(None) == "—"
    assert usd(0) == "$0.00"
    assert usd(0.0123) == "$0.0123"
    assert usd(12.5) == "$12.50"
    assert usd(1234.5) == "$1,234.50"
    assert tokens(None) == "—"
    assert tokens(950) == "950"
    assert tokens(12_345) == "12.3k"
    assert tokens(12_000) == "12k"
    assert tokens(4_120_000) == "4.1M"
    assert duration(None) == "—"
    assert duration(450) == "450 ms"
    assert duration(4_200) == "4.2 s"
    assert duration(42_000) == "42 s"
    assert duration(63_000) == "1 m 03 s"
    assert duration(7_500_000) == "2 h 05 m"


def test_slug_makes_css_classes() -> None:
    assert slug("not viable") == "not-viable"
    assert slug("HELD") == "held"
    assert slug("") == "unknown"


DIFF = """diff --git a/src/slug.py b/src/slug.py
index 1111111..2222222 100644
--- a/src/slug.py
+++ b/src/slug.py
@@ -1,2 +1,2 @@
 def slugify(text):
--- an old comment
-    return "-".join(w for w in text.split() if w.isalpha())
+    return "-".join(w for w in text.split() if w.isalnum())
"""


def test_diff_lines_tell_headers_hunks_and_changes_apart() -> None:
    kinds = [line.kind for line in diff_lines(DIFF)]
    assert kinds == [
        DiffLine.FILE,
        DiffLine.FILE,
        DiffLine.FILE,
        DiffLine.FILE,
        DiffLine.HUNK,
        DiffLine.CONTEXT,
        DiffLine.DEL,  # "--- " inside a hunk is a removed line, not a header
        DiffLine.DEL,
        DiffLine.ADD,
    ]
    assert diff_lines(None) == []


def test_diff_html_escapes_the_change() -> None:
    html = str(diff_html("@@ -1 +1 @@\n+<script>alert(1)</script>\n"))
    assert '<span class="d-add">+&lt;script&gt;alert(1)&lt;/script&gt;</span>' in html
    assert "<script>" not in html


def test_shorten_and_elapsed() -> None:
    assert shorten("  a  short\nline ") == "a short line"
    assert shorten("the script failed with a very long message", 20) == "the script failed …"
    assert shorten(None) == ""
    assert elapsed(NOW, NOW + timedelta(seconds=63)) == "1 m 03 s"
    assert elapsed(NOW, None) == "—"
    assert elapsed(NOW, NOW - timedelta(seconds=5)) == "0 ms"  # a clock step back is not negative


def test_times_read_iso_text_from_halt_state_files() -> None:
    assert when("2026-12-02T05:31:07.123Z") == "2026-12-02 05:31:07 UTC"
    assert ago("2026-12-02T05:28:07Z", NOW) == "3 min ago"
    assert when("not a time") == "not a time"
    assert "not a time" in str(timetag("not a time"))


def test_names_and_blocks_are_shown_without_controls_or_bidi() -> None:
    from assay.web.format import shown_lines, shown_text

    assert shown_text("a\nb\u202ec") == '"a\\nb<U+202E>c"'
    assert shown_text(None) == "" and shown_text("src/slug.py") == "src/slug.py"
    # An escape sequence is dropped (a block that keeps its colours goes through ``ansi``);
    # a lone ESC is escaped.
    assert shown_lines("one\n\ttwo\x1b[2J\u2066\x1b") == "one\n\ttwo<U+2066>\\x1b"
    assert shown_text("\x1b[1m\x1b[31mE boom\x1b[39;49;00m") == "E boom"
    html = str(diff_html("+++ b/x\n@@ -1 +1 @@\n+if user\u202e != admin:\n"))
    assert "\u202e" not in html and '<span class="d-add">+if user&lt;U+202E&gt; != admin:' in html


@pytest.mark.parametrize(
    "url", ["https://github.com/o/r/pull/7", "http://gitea.local:3000/o/r/pulls/1", "HTTPS://x.y/"]
)
def test_an_absolute_http_url_may_be_a_link(url: str) -> None:
    assert http_url(url) == url


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(document.domain)//",
        "JavaScript:alert(1)",
        "\tjavascript:alert(1)",
        "java\nscript:alert(1)",
        "data:text/html;base64,PHNjcmlwdD4=",
        "vbscript:msgbox(1)",
        "file:///etc/passwd",
        "//evil.example/x",
        "/relative",
        "https:evil.example",
        "https:///evil",
        "https://a b",
        "https://x\u202e.example",
        "",
        None,
        42,
    ],
)
def test_anything_else_is_no_link(url: object) -> None:
    assert http_url(url) is None


TEMPLATES = Path(__file__).resolve().parents[3] / "src" / "assay" / "web" / "templates"
# Every href a template builds from a value, and why each is safe: a path of ours, or a URL
# that passed http_url. A new one must be added here, with its reason.
KNOWN_HREFS = {
    "{{ back }}",  # the message page's way back: a path the routes build with quote()
    "{{ query(page=current - 1) or '?' }}",  # the pager: a query string of our own
    "{{ query(page=n) or '?' }}",
    "{{ query(page=current + 1) }}",
    "{{ view.link(status=value) or '/' }}",  # the queue's own query, a status of the vocabulary
    "{{ view.link(status='needs-you') }}",
    "{{ view.sort_link(column) }}",  # a sort of the fixed vocabulary, the rest of the query
    "{{ view.link(held_by=row.held_by) }}",  # a holder the ledger names, as a filter
    "{{ pr|http_url }}",  # a pull request's URL: http(s) only
    "{{ more }}",  # a long text's "show all": /tasks/<id>/text/<field>, ids urlencoded
    "{{ full }}",  # a validator's full log: /runs/<id>/logs/<name>, both urlencoded
}


def test_every_href_built_from_a_value_is_a_known_safe_one() -> None:
    found = set()
    for template in TEMPLATES.glob("*.html"):
        for href in re.findall(r'href="([^"]*)"', template.read_text()):
            if href.startswith("{{"):
                found.add(href)
            else:
                assert href.startswith(("/", "#", "?")), (template.name, href)
    assert found == KNOWN_HREFS


def test_line_is_a_text_start_on_one_line() -> None:
    from assay.web.format import line

    title = "fix \u202e" + "x" * 200_000
    shown = line(title, 80)
    assert len(shown) < 100 and shown.endswith(" …") and "<U+202E>" in shown
    assert "\u202e" not in shown
    assert line("short") == "short" and line(None) == ""
    assert line("a\x1b[31mred\x1b[0m\nb") == '"ared\\nb"'


def test_a_huge_diff_line_is_cut_and_its_rest_counted() -> None:
    from assay.web.format import DIFF_LINE_LIMIT

    line = "+" + "<a>" * 70_000  # a minified file: one 210 KB line
    html = str(diff_html(f"diff --git a/x b/x\n@@ -0,0 +1 @@\n{line}\n ctx\x00"))
    added = html.split('<span class="d-add">')[1].split("</span>", maxsplit=1)[0]
    assert added.startswith("+&lt;a&gt;") and "&lt;" not in added.split("<em")[1]
    assert len(added) < DIFF_LINE_LIMIT * 4  # the kept start (each < escaped) and the note
    assert '<em class="d-cut"> … 208 KB more on this line</em>' in added
    assert '<span class="d-ctx"> ctx\\x00</span>' in html  # a NUL in the diff is no cut
    small = str(diff_html("@@ -1 +1 @@\n+short\n"))
    assert "d-cut" not in small
