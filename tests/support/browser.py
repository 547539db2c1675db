"""The dashboard in a real browser, as its browser tests share it: ``assay serve --web-only``
as a real process (its tokens in a config folder of the test's own), headless Debian chromium
(a fresh context per test), screenshots, and logging in with the URL serve printed."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from support.repo import ASSAY, Repo
from support.services import service_missing

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

__all__ = [
    "CHROMIUM",
    "READY",
    "SHOTS",
    "TOKEN",
    "Dashboard",
    "browser",
    "environ",
    "free_port",
    "log_in",
    "page",
    "shot",
]


CHROMIUM = Path("/usr/bin/chromium")
TOKEN = "browser-test-token-0123456789"
READY = 30.0
SHOTS = Path(os.environ.get("ASSAY_TEST_ARTIFACTS") or "test-artifacts") / "screenshots"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}


class Dashboard:
    """``assay serve --web-only`` in the repository, its tokens in ``config``, until stopped."""

    def __init__(self, repo: Repo, config: Path, *args: str) -> None:
        self.port = free_port()
        self.login_url = ""
        self.proc = subprocess.Popen(
            [str(ASSAY), "serve", "--web-only", "--web-port", str(self.port), *args],
            cwd=repo.root,
            env={**environ(), "ASSAY_CONFIG_DIR": str(config)},
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
            login = re.search(r"(http://\S+/login\?token=\S+)", said[-1])
            if login:
                self.login_url = login.group(1)
            if said[-1].startswith("dashboard login: "):
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


def shot(page: Page, name: str, *, full_page: bool = True) -> None:
    """The page as ``<name>.png``: all of it, or (``full_page=False``: a page of thousands of
    lines, too tall to take whole) what the window shows."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    # A long page on a loaded machine takes more than the default 15 s to capture whole.
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page, timeout=60_000)


def log_in(page: Page, dashboard: Dashboard) -> None:
    """Open the login URL ``assay serve`` printed: it lands on the queue, the token gone."""
    assert dashboard.login_url, "serve printed no login URL"
    page.goto(dashboard.login_url)
    assert page.url == dashboard.url + "/"
