"""Whether open ``/events`` streams slow the dashboard's other pages.

Builds a ledger of ``--tasks`` tasks (default 10,000, three events each, as bench/web.py fills
it), serves it with the dashboard's own ``DashboardServer`` (a real uvicorn), then times
``GET /`` (a fresh connection each time) three ways: with no stream open; with ``--streams``
(default 20) ``GET /events?after=0`` streams opened from one client that never reads a byte
(what a hostile local process does); and the same with the per-client stream limit lifted, so
all of them are served and only the server's handling of open streams is measured.

    PYTHONPATH=src .venv/bin/python bench/web_streams.py [--tasks 10000] [--streams 20]

It also runs against a checkout from before dashboard tokens and stream limits (the
"before" figure): ``PYTHONPATH=<that checkout>/src``; then no credential is sent nor needed.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields, replace
from pathlib import Path

import httpx
from web import fill_queue

from assay.adapters.store.connect import make_engine
from assay.adapters.store.sql import Ledger
from assay.web.config import WebConfig
from assay.web.server import DashboardServer

TOKEN = "bench-token-0123456789abcdef"


def config_for(ledger: Ledger, folder: Path) -> WebConfig:
    """The dashboard's config with one credential the bench's requests carry."""
    try:
        from assay.web.auth import Credentials
        from assay.web.tokens import TokenStore
    except ImportError:  # a checkout from before dashboard tokens: everyone was let in
        return WebConfig(ledger=ledger, port=0)
    store = TokenStore(folder)
    store.add("bench", TOKEN)
    return WebConfig(ledger=ledger, port=0, credentials=Credentials.of(store))


def timed_gets(url: str, count: int) -> list[float]:
    walls = []
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for _ in range(count):
        began = time.perf_counter()
        answer = httpx.get(url, headers=headers, timeout=60)
        walls.append(time.perf_counter() - began)
        assert answer.status_code == 200, answer.status_code
    return walls


@contextmanager
def unread_streams(host: str, port: int, count: int) -> Iterator[list[int]]:
    """``count`` open ``/events?after=0`` requests whose answers are never read; yields the
    status code each got (0: none yet, i.e. an open stream)."""
    socks = []
    request = (
        f"GET /events?after=0 HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    try:
        for _ in range(count):
            sock = socket.create_connection((host, port))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(request)
            socks.append(sock)
        time.sleep(1.0)  # every stream is past its first catch-up read
        statuses = []
        for sock in socks:
            sock.settimeout(2)
            head = sock.recv(16)  # only the status line: the rest stays unread
            statuses.append(int(head.split()[1]) if head.startswith(b"HTTP/1.1") else 0)
        yield statuses
    finally:
        for sock in socks:
            sock.close()


def report(name: str, walls: list[float]) -> None:
    print(
        f"  {name:<44} median {statistics.median(walls) * 1000:8.1f} ms"
        f"   max {max(walls) * 1000:8.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000, help="tasks in the ledger")
    parser.add_argument("--streams", type=int, default=20, help="unread streams to open")
    parser.add_argument("--repeat", type=int, default=15, help="timed GET / per figure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="assay-bench-streams-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'assay.db'}"
        ledger = Ledger.open(url)
        engine = make_engine(url)
        fill_queue(engine, args.tasks)
        engine.dispose()
        print(f"{args.tasks} tasks, {3 * args.tasks} events; GET / x {args.repeat} each")
        base = config_for(ledger, Path(tmp) / "config")
        limited = "stream_limit" in {f.name for f in fields(WebConfig)}
        for lifted in (False, True) if limited else (False,):
            config = replace(base, stream_limit=10_000) if lifted else base
            server = DashboardServer(config)
            server.start()
            page = server.url
            try:
                if not lifted:
                    timed_gets(page, 3)  # warm-up
                    report("no stream open", timed_gets(page, args.repeat))
                with unread_streams("127.0.0.1", server.port, args.streams) as statuses:
                    served = sum(1 for s in statuses if s == 200)
                    refused = sum(1 for s in statuses if s == 429)
                    what = (
                        "limit lifted" if lifted else "per-client limit" if limited else "no limit"
                    )
                    report(
                        f"{args.streams} unread streams ({what}: {served} open, {refused} x 429)",
                        timed_gets(page, args.repeat),
                    )
            finally:
                server.stop()
        ledger.close()


if __name__ == "__main__":
    main()
