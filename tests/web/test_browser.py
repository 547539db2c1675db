"""The dashboard in a real browser: headless chromium against a real ``assay serve --web-only``
over a ledger real ``assay run``s filled (a private copy of the shared world).

One browser for the module, a fresh context (cookies) per test. A screenshot of each page goes
to ``$ASSAY_TEST_ARTIFACTS/screenshots`` (default ``test-artifacts/screenshots``).
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from support.repo import ASSAY, PYTEST, Repo
from support.services import service_missing

from assay.adapters.store.sql import Ledger
from assay.core.vocab import EventKind

if TYPE_CHECKING:
    from conftest import World
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
TOKEN = "browser-test-token"
READY = 30.0
SHOTS = Path(os.environ.get("ASSAY_TEST_ARTIFACTS") or "test-artifacts") / "screenshots"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}


class Dashboard:
    """``assay serve --web-only`` in the repository, until stopped."""

    def __init__(self, repo: Repo, *args: str) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [str(ASSAY), "serve", "--web-only", "--web-port", str(self.port), *args],
            cwd=repo.root,
            env=environ(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}"

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line.rstrip("\n"))

    def ready(self) -> None:
        deadline = time.monotonic() + READY
        said: list[str] = []
        while time.monotonic() < deadline:
            try:
                said.append(self.lines.get(timeout=0.1))
            except queue.Empty:
                assert self.proc.poll() is None, said
                continue
            if said[-1].startswith("dashboard: "):
                return
        raise AssertionError(f"the dashboard never started: {said}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


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
        Dashboard(repo),
        Dashboard(repo, "--web-host", "0.0.0.0", "--web-token", TOKEN),
    ]
    try:
        for one in dashboards:
            one.ready()
        yield Site(world, *dashboards)
    finally:
        for one in dashboards:
            one.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        service_missing(f"no chromium at {CHROMIUM} (.ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()


def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def events(ledger: Ledger, task_id: str) -> list[Any]:
    return [e for e in ledger.events(task_id) if e.kind == EventKind.TASK_SAVED]


def test_the_queue_lists_every_task(site: Site, page: Page) -> None:
    page.goto(site.open.url + "/")
    rows = page.locator("table.queue tbody tr")
    w = site.world
    for task in (w.done_task, w.held_task, w.halted_task, w.queued_task):
        assert rows.filter(has_text=task).count() == 1, task
    assert "held" in rows.filter(has_text=w.held_task).inner_text()
    page.wait_for_selector("#live-status.live-on")  # live.js connected to /events
    shot(page, "queue")


def test_a_held_task_is_released_from_its_page(site: Site, page: Page) -> None:
    w = site.world
    page.goto(f"{site.open.url}/tasks/{w.held_task}")
    shot(page, "task")
    release = page.locator(f'form[action="/tasks/{w.held_task}/release"]')
    release.locator('input[name="by"]').fill("browser tester")
    release.locator('button[type="submit"]').click()
    page.wait_for_url(f"**/tasks/{w.held_task}?notice=*")
    assert "released" in page.locator(".notice").inner_text()
    with site.ledger() as ledger:
        assert ledger.get_task(w.held_task).status == "queued"
        move = events(ledger, w.held_task)[-1].data
    assert move["action"] == "release" and move["by"] == "browser tester"
    assert move["via"] == "web"


def test_a_run_timeline_shows_the_blocked_attempt_then_the_pass(site: Site, page: Page) -> None:
    page.goto(f"{site.open.url}/runs/{site.world.pass_run}")
    attempts = page.locator("article.attempt")
    assert attempts.count() == 2
    first, second = attempts.nth(0), attempts.nth(1)
    assert "Attempt 1" in first.inner_text() and "blocked" in first.inner_text().lower()
    assert "Attempt 2" in second.inner_text() and "pass" in second.inner_text().lower()
    assert page.locator("pre.diff").count() == 1
    shot(page, "run")


def test_the_halts_page_lists_the_fired_halt(site: Site, page: Page) -> None:
    page.goto(f"{site.open.url}/halts")
    body = page.locator("main").inner_text()
    assert site.world.halted_task in body and "halt-scope-breach" in body
    assert "assay halt rearm" in body
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
coder: {{kind: replay, steps: [{{script: "sleep 4; {wrong}"}},
  {{script: "{fixed}; echo '# keeps letters and digits' >> src/slug.py"}}]}}
validators: [{{id: tests, kind: command, run: "{PYTEST}"}}]
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
        page.goto(f"{site.open.url}/runs/{run_id}")
        page.wait_for_selector("#live-status.live-on")
        page.evaluate("window.__notReloaded = true")
        assert page.locator("#attempt-2").count() == 0  # attempt 1 still sleeps: nothing yet
        page.wait_for_selector("#attempt-2", timeout=60_000)  # appeared without a reload
        assert page.evaluate("window.__notReloaded === true")
        page.wait_for_function("!document.querySelector('#run .live-badge')", timeout=60_000)
        assert page.evaluate("window.__notReloaded === true")
        assert "pass" in page.locator("#attempt-2").inner_text().lower()
        shot(page, "run-live")
    finally:
        _, err = run.communicate(timeout=90)
    assert run.returncode == 0, err


def _open_run(site: Site, before: float) -> str:
    """The id of the run the test just started, once the ledger has it open (the copied
    world has no other open run)."""
    with site.ledger() as ledger:
        while time.monotonic() - before < READY:
            found = ledger.open_runs()
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
    page.goto(f"{site.open.url}/")  # the victim has the dashboard's cookies
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
        assert "nothing was done" in page.locator("main").inner_text()
        shot(page, "refusal")
        assert ledger.get_task(w.queued_task).status == "queued"
        assert len(ledger.events()) == before
