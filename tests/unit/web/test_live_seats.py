"""A running seat on the dashboard: its elapsed time as a ticking element, what its coder did
so far (usage reports, tokens, cost: unknown is never $0) and its log's last lines; the log
view told only the lines that changed since what it shows. In-process, over a SQLite ledger."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from assay.adapters.store.sql import Ledger
from assay.adapters.store.usage_log import DispatchKey
from assay.core.run_logs import KeptLog
from assay.core.usage import UsageFigures
from assay.core.vocab import EventKind, LogRole, UsageRole
from assay.web import format as fmt
from assay.web import view_logs, views

sys.path.insert(0, str(Path(__file__).parents[2] / "support"))

from ledger_driver import Driver

NOW = datetime.now(UTC)
STREAM = "attempt-1/seat-1/claude.log.out"
ESC = "\x1b"


def _key(seat: int) -> DispatchKey:
    return DispatchKey("t1", "r1", f"a1.s{seat}", UsageRole.CODER, "claude", 1, seat)


@pytest.fixture(autouse=True)
def now() -> None:
    """``NOW`` as each test starts: a run's elapsed time is read against the real clock."""
    global NOW  # noqa: PLW0603
    NOW = datetime.now(UTC)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(f"sqlite:///{tmp_path / 'assay.db'}") as made:
        driver = Driver(made, start=NOW - timedelta(minutes=5))
        driver.add("t1")
        driver.start("t1", "r1")
        for seat in (1, 2):
            made.append_event(
                EventKind.DISPATCH_STARTED,
                {"attempt": 1, "seat": seat, "coder": "claude"},
                at=NOW - timedelta(minutes=3),
                task_id="t1",
                run_id="r1",
            )
        # Seat 1 reported twice, tokens without a cost; seat 2 nothing yet.
        for tokens in (100, 250):
            made.record_usage(
                _key(1), UsageFigures(tokens_in=tokens, tokens_out=10), priced=False, at=NOW
            )
        lines = "".join(f"step {n}\n" for n in range(1, 21)) + f"{ESC}[31mE the newest{ESC}[0m\n"
        made.ship_logs("r1", [KeptLog(STREAM, LogRole.CODER, 1, 1, 999, lines, True)], at=NOW)
        yield made


def test_a_running_seat_says_what_its_coder_did_so_far(ledger: Ledger) -> None:
    run = views.run_view(ledger, "r1", state_dir=None)
    assert run is not None
    one, two = run.attempts[0].seats
    assert one.state == two.state == "running"
    assert one.started_at == NOW - timedelta(minutes=3)
    assert one.live is not None and two.live is not None
    assert (one.live.reports, one.live.tokens, one.live.cost_usd) == (2, 370, None)
    assert one.live.tail.splitlines()[-1] == f"{ESC}[31mE the newest{ESC}[0m"
    assert len(one.live.tail.splitlines()) == 8 and "step 14" in one.live.tail
    assert one.log == STREAM and one.live.log_updated_at is not None
    assert (two.live.reports, two.live.tokens, two.live.cost_usd, two.live.tail) == (
        0,
        None,
        None,
        "",
    )


def test_the_run_fragment_shows_a_ticking_start_the_figures_and_the_last_lines(
    client: TestClient,
) -> None:
    html = client.get("/fragments/runs/r1").text
    assert html.count("data-live-poll") == 2  # a running seat's row asks to be refreshed
    started = (NOW - timedelta(minutes=3)).isoformat(timespec="milliseconds")
    assert f'data-since="{started}"' in html  # the seats' elapsed time, ticked by clock.js
    assert html.count('class="elapsed" data-since=') == 3  # the run's and its two seats'
    assert re.search(r'data-since="[^"]+" title="since [^"]+">[3-9] m \d\d s<', html)  # as rendered
    assert 'class="live-turns">2<' in html and 'class="live-tokens">370<' in html
    assert 'class="live-cost">unknown<' in html and "$0" not in html
    assert "(not reported yet)" in html  # seat 2: nothing reported
    assert '<span class="ansi-fg-31">E the newest</span>' in html
    assert f"/runs/r1/logs/{STREAM}" in html
    assert ESC not in html


def test_a_running_run_on_the_task_page_and_the_queue_ticks_its_elapsed_time(
    client: TestClient,
) -> None:
    assert "running for" in client.get("/fragments/tasks/t1").text
    queue = client.get("/fragments/queue").text
    assert "running for" in queue and "data-since=" in queue


def test_every_page_loads_the_clock_with_the_server_s_time(client: TestClient) -> None:
    html = client.get("/runs/r1").text
    found = re.search(r'<script src="/static/clock.js" data-now="([^"]+)" defer>', html)
    assert found and abs(datetime.fromisoformat(found.group(1)) - datetime.now(UTC)).seconds < 60
    assert client.get("/static/clock.js").status_code == 200


def test_since_writes_the_elapsed_time_and_its_start() -> None:
    start = datetime(2026, 12, 6, 3, 0, tzinfo=UTC)
    html = str(fmt.since(start, now=start + timedelta(seconds=63)))
    assert html == (
        '<span class="elapsed" data-since="2026-12-06T03:00:00.000+00:00" '
        'title="since 2026-12-06 03:00:00 UTC">1 m 03 s</span>'
    )
    assert "muted" in str(fmt.since(None))


def _page(text: str, live: bool = True) -> view_logs.LogPage:
    return view_logs.LogPage(
        "n", "n", "r1", "t1", "t", "coder", 1, 1, len(text), False, NOW, text, "n", live
    )


def test_a_log_that_grew_sends_only_its_changed_lines() -> None:
    old = _page(f"one\n{ESC}[31mtwo\nthr")
    grown = _page(f"one\n{ESC}[31mtwo\nthree\nfour\n")
    update = view_logs.log_update(grown, old.length, old.sig)
    assert update.start == 2 and update.total == 5
    # The colour set on line 2 still holds on the lines sent: rendered whole, then cut.
    assert [str(x) for x in update.lines] == [
        '<span class="ansi-fg-31">three</span>',
        '<span class="ansi-fg-31">four</span>',
        "",
    ]
    assert (update.length, update.sig, update.live) == (grown.length, grown.sig, True)
    same = view_logs.log_update(grown, grown.length, grown.sig)
    assert (same.start, same.lines) == (5, [])


def test_a_replaced_log_is_sent_whole() -> None:
    old = _page("a live copy\nline\n")
    final = _page("$ claude\n--- stdout ---\nline\n", live=False)
    update = view_logs.log_update(final, old.length, old.sig)
    assert update.start == 0 and len(update.lines) == 4 and not update.live
    assert view_logs.log_update(final, 10**9, "nonsense").start == 0


def test_the_log_follow_route_answers_in_json_and_404s_a_missing_log(client: TestClient) -> None:
    page = client.get(f"/runs/r1/logs/{STREAM}").text
    follow = re.search(r'data-follow="([^"]+)" data-length="(\d+)" data-sig="([0-9a-f]+)"', page)
    assert follow is not None and 'id="log-follow"' in page
    url, length, sig = follow.groups()
    same = client.get(url, params={"length": length, "sig": sig})
    assert same.status_code == 200 and same.headers["cache-control"] == "no-store"
    assert same.json()["lines"] == [] and same.json()["live"] is True
    fresh = client.get(url).json()
    assert fresh["size"] == "999 bytes" and fresh["kept"] == NOW.isoformat()
    assert fresh["start"] == 0 and fresh["total"] == len(fresh["lines"]) == 22
    assert fresh["lines"][0] == view_logs.ansi.html_lines("step 1")[0]
    assert client.get("/fragments/runs/r1/logs/attempt-1/none.log").status_code == 404
    assert client.get(url, params={"length": -1}).status_code == 400
