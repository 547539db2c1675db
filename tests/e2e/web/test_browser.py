"""The dashboard in a real browser: headless chromium against a real ``assay serve --web-only``
over a ledger real ``assay run``s filled (a private copy of the shared world).

One browser for the module, a fresh context (cookies) per test; each dashboard keeps its tokens
in a config folder of the test's own, and the tests log in with the URL ``assay serve``
printed. A screenshot of each page goes to ``$ASSAY_TEST_ARTIFACTS/screenshots`` (default
``test-artifacts/screenshots``).
"""

from __future__ import annotations

import contextlib
import http.server
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from support.browser import READY, TOKEN, Dashboard, environ, log_in, shot
from support.repo import ASSAY, CHECK_TESTS, Repo

from assay.adapters.store.sql import Ledger
from assay.adapters.store.usage_log import DispatchKey
from assay.core.run_logs import KeptLog
from assay.core.tasks import Task
from assay.core.usage import UsageFigures
from assay.core.vocab import EventKind, LogRole, UsageRole

if TYPE_CHECKING:
    from conftest import World
    from playwright.sync_api import Dialog, Page


@dataclass
class Site:
    world: World
    open: Dashboard
    guarded: Dashboard

    def ledger(self) -> Ledger:
        return Ledger(self.world.url)


@pytest.fixture(scope="module")
def site(sqlite_world: World, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    target = tmp_path_factory.mktemp("browser") / "copy"
    shutil.copytree(sqlite_world.repo.root.parent, target, symlinks=True)
    repo = Repo(root=target / "repo", fixes=target / "fixes")
    world = replace(
        sqlite_world,
        repo=repo,
        url=f"sqlite:///{repo.root / '.assay' / 'assay.db'}",
        state_dir=repo.root / ".assay" / "halt-state",
    )
    # Started together: each takes a few seconds to come up on a loaded machine.
    dashboards = [
        Dashboard(repo, target / "config-open"),
        Dashboard(repo, target / "config-guarded", "--web-host", "0.0.0.0", "--web-token", TOKEN),
    ]
    try:
        for one in dashboards:
            one.ready()
        yield Site(world, *dashboards)
    finally:
        for one in dashboards:
            one.stop()


def events(ledger: Ledger, task_id: str) -> list[Any]:
    return [e for e in ledger.events(task_id) if e.kind == EventKind.TASK_SAVED]


def test_the_queue_lists_every_task(site: Site, page: Page) -> None:
    log_in(page, site.open)
    rows = page.locator("table.queue tbody tr")
    w = site.world
    for task in (w.done_task, w.held_task, w.halted_task, w.queued_task):
        assert rows.filter(has_text=task).count() == 1, task
    assert "held" in rows.filter(has_text=w.held_task).inner_text()
    page.wait_for_selector("#live-status.live-on")  # live.js connected to /events
    shot(page, "queue")
    # Held by the halt its run fired: the filter, then a sort link that keeps it.
    page.goto(f"{site.open.url}/?held_by=halt")
    assert rows.count() == 1 and rows.filter(has_text=w.halted_task).count() == 1
    assert rows.locator("a.held-by").inner_text() == "halt"
    page.locator("th.sortable a", has_text="Cost").click()
    page.wait_for_url("**/?held_by=halt&sort=cost")
    assert rows.count() == 1 and page.locator('select[name="held_by"]').input_value() == "halt"
    page.wait_for_selector("#live-status.live-on")
    # The header's counts follow the ledger live: a new task held by an operator.
    total = page.locator(".queue-total")
    before = int(total.inner_text().split()[0])
    needs_you = int(page.locator("#needs-you-count").inner_text())
    now = datetime.now(UTC)
    with site.ledger() as ledger:
        task = Task.new(id="t-live-count", title="Added while watched", instruction="x", now=now)
        ledger.add_task(task)
        task.hold("watch the counts", now)
        ledger.save_task(task)
    page.wait_for_function(
        "n => document.querySelector('.queue-total').textContent.startsWith(n + ' tasks')",
        arg=before + 1,
    )
    assert int(page.locator("#needs-you-count").inner_text()) == needs_you + 1
    shot(page, "queue-filtered")


def test_a_held_task_is_released_from_its_page(site: Site, page: Page) -> None:
    w = site.world
    log_in(page, site.open)
    page.goto(f"{site.open.url}/tasks/{w.held_task}")
    shot(page, "task")
    release = page.locator(f'form[action="/tasks/{w.held_task}/release"]')
    assert release.locator('input[name="by"]').count() == 0  # who acts is the login
    release.locator('button[type="submit"]').click()
    page.wait_for_url(f"**/tasks/{w.held_task}?notice=released")
    assert "Task released" in page.locator(".notice").inner_text()
    with site.ledger() as ledger:
        assert ledger.get_task(w.held_task).status == "queued"
        move = events(ledger, w.held_task)[-1].data
    assert move["action"] == "release" and move["by"] == "operator"  # the token's name
    assert move["via"] == "web"


def test_a_run_timeline_shows_the_blocked_attempt_then_the_pass(site: Site, page: Page) -> None:
    log_in(page, site.open)
    page.goto(f"{site.open.url}/runs/{site.world.pass_run}")
    attempts = page.locator("article.attempt")
    assert attempts.count() == 2
    first, second = attempts.nth(0), attempts.nth(1)
    assert "Attempt 1" in first.inner_text() and "blocked" in first.inner_text().lower()
    assert "Attempt 2" in second.inner_text() and "pass" in second.inner_text().lower()
    assert page.locator("pre.diff").count() == 1
    shot(page, "run")


def test_the_halts_page_lists_the_fired_halt(site: Site, page: Page) -> None:
    log_in(page, site.open)
    page.goto(f"{site.open.url}/halts")
    body = page.locator("main").inner_text()
    assert site.world.halted_task in body and "halt-scope-breach" in body
    assert "assay halt rearm" in body
    title = page.locator("table.halts-table a.title")  # the task's title, linked
    assert title.inner_text().startswith("Rename the package")
    assert title.get_attribute("href") == f"/tasks/{site.world.halted_task}"
    shot(page, "halts")


def test_a_live_run_page_changes_while_the_run_goes_on(site: Site, page: Page) -> None:
    repo = site.world.repo
    # main already has the fix (the world's first run merged it): attempt 1 breaks it after a
    # pause (blocked by the tests), attempt 2 writes the fix with a comment (passes).
    wrong, fixed = repo.put("wrong.py", "src/slug.py"), repo.put("fixed.py", "src/slug.py")
    contract = repo.contract(
        "live.yaml",
        f"""task: Note what slugify keeps.
scope: {{allow: ["src/**"]}}
coder: {{kind: replay, steps: [{{script: "echo {CODING}; sleep 4; {wrong}"}},
  {{script: "{fixed}; echo '# keeps letters and digits' >> src/slug.py"}}]}}
validators: [{{id: tests, kind: command, run: "{CHECK_TESTS}"}}]
land: none
""",
    )
    run = subprocess.Popen(
        [str(ASSAY), "run", "--contract", str(contract)],
        cwd=repo.root,
        env=environ(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        run_id = _open_run(site, before=time.monotonic())
        log_in(page, site.open)
        page.goto(f"{site.open.url}/runs/{run_id}")
        page.wait_for_selector("#live-status.live-on")
        page.evaluate("window.__notReloaded = true")
        assert page.locator("#attempt-2").count() == 0  # attempt 1 still sleeps: nothing yet
        # The running coder's output is in the ledger before its seat ends (shipped live).
        shipped = _live_log(site, run_id, CODING)
        assert shipped.endswith(".log.out") and page.locator("#attempt-2").count() == 0
        page.wait_for_selector("#attempt-2", timeout=60_000)  # appeared without a reload
        assert page.evaluate("window.__notReloaded === true")
        # A locator's wait (wait_for_function evaluates a string: the page's CSP forbids that).
        page.locator("#run .live-badge").wait_for(state="detached", timeout=60_000)
        assert page.evaluate("window.__notReloaded === true")
        assert "pass" in page.locator("#attempt-2").inner_text().lower()
        shot(page, "run-live")
    finally:
        _, err = run.communicate(timeout=90)
    assert run.returncode == 0, err


CODING = "coding-live-0123"


def _live_log(site: Site, run_id: str, said: str) -> str:
    """The name of the run's log that holds ``said``, once the ledger has it, while the
    run's first seat has not finished."""
    with site.ledger() as ledger:
        deadline = time.monotonic() + READY
        while time.monotonic() < deadline:
            kinds = {e.kind for e in ledger.events(run_id=run_id)}
            assert EventKind.SEAT_FINISHED not in kinds, "the seat ended before its log was seen"
            for entry in ledger.run_logs(run_id):
                kept = ledger.run_log(run_id, entry.name)
                if kept is not None and said in (kept.text or ""):
                    return entry.name
            time.sleep(0.2)
    raise AssertionError("the running coder's log never reached the ledger")


def _open_run(site: Site, before: float) -> str:
    """The id of the run the test just started, once the ledger has it open (the copied
    world has no other open run but the ones tests below open)."""
    with site.ledger() as ledger:
        while time.monotonic() - before < READY:
            found = [r for r in ledger.open_runs() if r.id not in (HOSTILE_RUN, LIVE_RUN)]
            if found:
                return found[0].id
            time.sleep(0.1)
    raise AssertionError("the run never opened")


def test_without_the_token_nothing_is_shown_or_done(site: Site, page: Page) -> None:
    w = site.world
    guarded = f"http://127.0.0.1:{site.guarded.port}"
    page.goto(f"{guarded}/tasks/{w.queued_task}")
    assert page.locator("h1").inner_text() == "Token required"
    assert w.queued_task not in page.locator("main").inner_text()
    shot(page, "login")
    with site.ledger() as ledger:
        before = len(ledger.events())
        csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "assay_csrf")
        refused = page.request.post(
            f"{guarded}/tasks/{w.queued_task}/hold",
            form={"csrf": csrf, "reason": "no token"},
            headers={"Origin": guarded},
        )
        assert refused.status == 401
        assert ledger.get_task(w.queued_task).status == "queued"
        assert len(ledger.events()) == before
    page.fill('input[name="token"]', TOKEN)
    page.click('button[type="submit"]')
    page.wait_for_url(f"**/tasks/{w.queued_task}")
    assert w.queued_task in page.locator("main").inner_text()


def test_a_form_on_another_site_is_refused(site: Site, page: Page) -> None:
    w = site.world
    log_in(page, site.open)  # the victim is logged in and has the dashboard's cookies
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "assay_csrf")
    # Even knowing the token, a page of another origin gets nothing done.
    attack = (
        f'<form method="post" action="{site.open.url}/tasks/{w.queued_task}/hold">'
        f'<input name="csrf" value="{csrf}"><input name="reason" value="forged">'
        '<button type="submit">win a prize</button></form>'
    )
    page.route(
        "http://evil.example/**", lambda route: route.fulfill(body=attack, content_type="text/html")
    )
    with site.ledger() as ledger:
        before = len(ledger.events())
        page.goto("http://evil.example/")
        with page.expect_navigation():
            page.click("button")
        assert page.url.startswith(site.open.url)
        # The session cookie is SameSite=Strict: a cross-site POST arrives logged out (401);
        # and were it not, its Sec-Fetch-Site would be refused (403).
        assert page.locator("h1").inner_text() in ("Token required", "Refused")
        shot(page, "refusal")
        assert ledger.get_task(w.queued_task).status == "queued"
        assert len(ledger.events()) == before


HOSTILE_RUN = "r-hostile-pr"
HOSTILE_URL = "javascript:alert(document.domain)//"


@contextlib.contextmanager
def another_port(html: str) -> Iterator[str]:
    """A page served on another local port: another origin, but the same site as the
    dashboard (so its SameSite=Strict cookies would go along into a frame)."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_a_page_on_another_port_cannot_frame_the_dashboard(site: Site, page: Page) -> None:
    w = site.world
    log_in(page, site.open)  # the victim is logged in: a framed page would act as them
    framing = (
        f'<p>win a prize</p><iframe id="victim" src="{site.open.url}/tasks/{w.queued_task}" '
        'width="1200" height="800"></iframe>'
    )
    with another_port(framing) as url, site.ledger() as ledger:
        before = len(ledger.events())
        page.goto(url)
        page.wait_for_load_state("load")
        frame = page.locator("#victim").content_frame
        # Blocked by X-Frame-Options / frame-ancestors: an error page, none of the dashboard.
        assert frame.locator("form").count() == 0 and frame.locator("button").count() == 0
        box = page.locator("#victim").bounding_box()
        assert box is not None
        for fx in (0.1, 0.3, 0.5, 0.7, 0.9):  # click all over where its buttons would be
            for fy in (0.1, 0.3, 0.5, 0.7, 0.9):
                page.mouse.click(box["x"] + box["width"] * fx, box["y"] + box["height"] * fy)
        shot(page, "framed")
        assert ledger.get_task(w.queued_task).status == "queued"
        assert len(ledger.events()) == before


def test_a_javascript_pull_request_url_is_text_not_a_link(site: Site, page: Page) -> None:
    now = datetime.now(UTC)
    with site.ledger() as ledger:
        task = Task.new(id="t-hostile-pr", title="A forged pull request", instruction="x", now=now)
        ledger.add_task(task)
        task.start(now, run_id=HOSTILE_RUN)
        ledger.start_run(task, HOSTILE_RUN, started_at=now)  # open: its land events are read
        ledger.append_event(
            EventKind.LAND_PR_OPENED, {"url": HOSTILE_URL}, at=now, run_id=HOSTILE_RUN
        )
    dialogs: list[str] = []

    def dismissed(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismissed)
    log_in(page, site.open)
    page.goto(f"{site.open.url}/runs/{HOSTILE_RUN}")
    assert page.locator('a[href^="javascript:" i]').count() == 0
    shown = page.locator("code.url", has_text=HOSTILE_URL)
    assert shown.count() == 1
    shown.click()
    page.get_by_text("pull request").first.click()
    page.wait_for_timeout(300)
    assert dialogs == [] and page.url == f"{site.open.url}/runs/{HOSTILE_RUN}"
    shot(page, "hostile-url")


LIVE_RUN = "r-live-seat"
LIVE_LOG = "attempt-1/seat-1/claude.log.out"


def test_a_running_seat_ticks_and_its_log_view_follows_the_tail(site: Site, page: Page) -> None:
    from playwright.sync_api import expect

    now = datetime.now(UTC)
    lines = "".join(f"step {n}: reading src/slug.py\n" for n in range(1, 31))
    key = DispatchKey("t-live-seat", LIVE_RUN, "a1.s1", UsageRole.CODER, "claude", 1, 1)
    with site.ledger() as ledger:
        task = Task.new(id="t-live-seat", title="A seat at work", instruction="x", now=now)
        ledger.add_task(task)
        task.start(now, run_id=LIVE_RUN)
        ledger.start_run(task, LIVE_RUN, started_at=now - timedelta(seconds=70))
        ledger.append_event(
            EventKind.DISPATCH_STARTED,
            {"attempt": 1, "seat": 1, "coder": "claude"},
            at=now - timedelta(seconds=65),
            task_id=task.id,
            run_id=LIVE_RUN,
        )
        ledger.record_usage(key, UsageFigures(tokens_in=1200, tokens_out=300), priced=False, at=now)
        ledger.ship_logs(
            LIVE_RUN, [KeptLog(LIVE_LOG, LogRole.CODER, 1, 1, 900, lines, False)], at=now
        )
    log_in(page, site.open)
    page.goto(f"{site.open.url}/runs/{LIVE_RUN}")
    elapsed = page.locator("table.seats .elapsed")
    assert elapsed.count() == 1
    shown = elapsed.inner_text()
    assert shown.startswith("1 m ")  # the seat started 65 s ago
    expect(elapsed).not_to_have_text(shown, timeout=5_000)  # ticked by the browser's script
    live = page.locator("tr.seat-live")
    assert "1.5k" in live.locator(".live-tokens").inner_text()
    assert live.locator(".live-cost").inner_text() == "unknown"  # no cost reported: never $0
    assert "step 30: reading src/slug.py" in live.locator("pre").inner_text()
    shot(page, "live-seat")

    page.goto(f"{site.open.url}/runs/{LIVE_RUN}/logs/{LIVE_LOG}")
    log = page.locator("#log li")
    assert log.count() == 31  # 30 lines and the empty one after the last newline
    page.evaluate("document.getElementById('L1').dataset.seen = 'yes'")
    page.fill("#log-search", "step 3")
    expect(page.locator("#log-count")).to_have_text("2 matching lines")  # 3 and 30
    with site.ledger() as ledger:  # the coder wrote on: the next ship holds two lines more
        grown = lines + "step 31: writing src/slug.py\nstep 32: running the tests\n"
        ledger.ship_logs(
            LIVE_RUN, [KeptLog(LIVE_LOG, LogRole.CODER, 1, 1, 990, grown, False)], at=now
        )
    expect(page.locator("#L32")).to_contain_text("step 32: running the tests", timeout=10_000)
    assert page.locator("#L32 a.ln").inner_text() == "32"
    assert page.locator("#log-size").inner_text() == "990 bytes"  # the header follows too
    assert page.evaluate("document.getElementById('L1').dataset.seen") == "yes"  # appended
    expect(page.locator("#log-count")).to_have_text("4 matching lines")  # the search holds
    assert page.locator("#log-download").get_attribute("href") == "?download=1"
    shot(page, "log-view-live")


def test_the_usage_page_charts_each_day_and_marks_unknown_costs(site: Site, page: Page) -> None:
    from assay.adapters.store.usage_log import DispatchKey
    from assay.core.usage import UsageFigures
    from assay.core.vocab import UsageRole

    w, now = site.world, datetime.now(UTC)
    with site.ledger() as ledger:  # today: one priced dispatch and one without a cost
        for dispatch, source, cost in (
            ("a9.s1", "usage-priced", 0.42),
            ("a9.s2", "usage-llm", None),
        ):
            key = DispatchKey(w.done_task, w.pass_run, dispatch, UsageRole.CODER, source, 9, 1)
            figures = UsageFigures(40_000, 2_000, cost, "m")
            ledger.record_usage(key, figures, priced=cost is not None, at=now)
    log_in(page, site.open)
    page.locator('header nav a[href="/usage"]').click()
    page.wait_for_url("**/usage")
    days = page.locator("#day-cost svg.chart g.bar")
    assert days.count() == 30
    today = days.nth(29)
    assert today.get_attribute("data-label") == now.date().isoformat()[5:]
    assert "partial" in (today.get_attribute("class") or "")  # a lower bound, marked
    mark = today.locator("rect.unknown-mark")
    known = today.locator("rect.part")
    mark_box, known_box = mark.bounding_box(), known.bounding_box()
    assert mark_box and known_box and mark_box["height"] > 0 and known_box["height"] > 20
    assert mark_box["y"] + mark_box["height"] <= known_box["y"] + 1  # drawn above the bar
    quiet = days.nth(0).locator("rect.part").bounding_box()
    assert quiet is None or quiet["height"] == 0  # a day with nothing: a zero-height bar
    coders = page.locator("#coder-cost svg.chart g.bar")
    priced = coders.filter(has=page.locator("xpath=self::*[@data-label='usage-priced']"))
    assert priced.count() == 1 and "partial" not in (priced.get_attribute("class") or "")
    assert "usage-llm" in page.locator("#coder-cost").inner_text()
    figures = page.locator("#day-cost details")
    figures.locator("summary").click()
    row = figures.locator("tbody tr").nth(29)
    assert row.locator("td").first.inner_text().startswith("≥ $0.42")
    assert "at least" in page.locator(".unknown-costs").inner_text()
    shot(page, "usage")
