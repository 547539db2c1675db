"""``GET /events`` under a client that opens streams and never reads them: each client holds at
most ``stream_limit`` streams (429 beyond), and open streams take their catch-up reads one at
a time, so the pages are not starved. Over a real uvicorn, with raw sockets as the hostile
client (it reads the status line, then nothing)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.dashboard import TOKEN, credentials

from assay.adapters.store.sql import Ledger
from assay.core.vocab import EventKind
from assay.web import live
from assay.web.app import create_app
from assay.web.config import WebConfig
from assay.web.server import DashboardServer
from assay.web.tokens import TokenStore

NOW = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
LIMIT = 4
WAIT = 5.0


class Dashboard:
    def __init__(self, folder: Path, **config: Any) -> None:
        self.ledger = Ledger.open(f"sqlite:///{folder / 'assay.db'}")
        self.store = TokenStore(folder / "config")
        settings = {"credentials": credentials(folder / "config"), "stream_limit": LIMIT}
        self.config = WebConfig(ledger=self.ledger, port=0, **{**settings, **config})
        self.server = DashboardServer(self.config, create_app(self.config))
        self.server.start()
        self.held: list[socket.socket] = []

    def stream(self, token: str | None = TOKEN, query: str = "after=0") -> int:
        """Open ``/events`` and read its status line only; the socket stays open, unread."""
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        sock = socket.create_connection(("127.0.0.1", self.server.port), timeout=WAIT)
        port = self.server.port
        request = f"GET /events?{query} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}\r\n"
        sock.sendall(request.encode())
        head = b""
        while b"\r\n" not in head:
            chunk = sock.recv(1)
            assert chunk, "the server closed the connection"
            head += chunk
        self.held.append(sock)
        return int(head.split()[1])

    def stop(self) -> None:
        for sock in self.held:
            sock.close()
        self.server.stop()
        self.ledger.close()


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[Dashboard]:
    served = Dashboard(tmp_path)
    yield served
    served.stop()


def test_a_credential_holds_at_most_its_limit_of_streams(dashboard: Dashboard) -> None:
    assert [dashboard.stream() for _ in range(LIMIT)] == [200] * LIMIT
    assert dashboard.stream() == 429
    refused = httpx.get(
        f"{dashboard.server.url}events",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=WAIT,
    )
    assert refused.status_code == 429 and refused.headers["retry-after"].isdigit()
    assert refused.headers["x-frame-options"] == "DENY"
    _, other = dashboard.store.add("grace")
    assert dashboard.stream(other) == 200  # another operator's streams are their own
    # A page still loads at once beside the full set of open streams.
    began = time.monotonic()
    page = httpx.get(dashboard.server.url, headers={"Authorization": f"Bearer {TOKEN}"})
    assert page.status_code == 200 and time.monotonic() - began < 2.0


def test_a_closed_stream_gives_its_slot_back(dashboard: Dashboard) -> None:
    assert [dashboard.stream() for _ in range(LIMIT)] == [200] * LIMIT
    dashboard.held.pop(0).close()
    deadline = time.monotonic() + WAIT
    while (status := dashboard.stream()) == 429:
        dashboard.held.pop().close()
        assert time.monotonic() < deadline, "the closed stream's slot never came back"
        time.sleep(0.05)
    assert status == 200


def test_without_a_credential_there_is_no_stream(dashboard: Dashboard) -> None:
    assert dashboard.stream(token=None) == 401
    assert dashboard.stream(token="not-a-token-of-this-dashboard") == 401


def test_anonymous_readers_are_counted_by_address(tmp_path: Path) -> None:
    served = Dashboard(tmp_path, anonymous_read=True)
    try:
        assert [served.stream(token=None) for _ in range(LIMIT)] == [200] * LIMIT
        assert served.stream(token=None) == 429
        assert served.stream() == 200  # the operator is not crowded out by them
    finally:
        served.stop()


def test_catch_ups_take_turns(dashboard: Dashboard, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many streams catching up from 0 read the ledger one batch at a time, all of them
    together: a page's own reads then wait for at most one."""
    for n in range(30):
        dashboard.ledger.append_event(EventKind.WARNING, {"message": f"e{n}"}, at=NOW)
    monkeypatch.setattr(live, "BATCH", 5)
    running, most, lock = 0, 0, threading.Lock()
    read = live.Hub._read_written

    def counted(self: live.Hub, *args: Any) -> tuple[int, str, int]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        try:
            time.sleep(0.01)
            return read(self, *args)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(live.Hub, "_read_written", counted)
    readers = []
    for _ in range(LIMIT):
        reader = httpx.Client(timeout=WAIT)
        readers.append(reader)
    got: list[list[str]] = [[] for _ in readers]

    def follow(i: int) -> None:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        url = f"{dashboard.server.url}events?after=0&plain=1"
        with readers[i].stream("GET", url, headers=headers) as response:
            for text in response.iter_lines():
                if text.startswith("id: "):
                    got[i].append(text)
                    if len(got[i]) == 30:
                        return

    threads = [threading.Thread(target=follow, args=(i,), daemon=True) for i in range(LIMIT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 2)
    for reader in readers:
        reader.close()
    assert [len(ids) for ids in got] == [30] * LIMIT  # every stream got every event, once
    assert most == 1
