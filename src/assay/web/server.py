"""The dashboard served by uvicorn in a thread of its own, beside the queue worker.

The socket is bound here, before the thread starts, so a taken port is the caller's clear
error (:class:`PortTaken`) and never a log line in a thread nobody reads. Stopping closes the
live streams first (they would otherwise hold uvicorn's graceful shutdown open), then uvicorn.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from assay.web.config import WebConfig

START_TIMEOUT = 10.0
GRACEFUL_SECONDS = 2


class PortTaken(Exception):
    """The host:port is in use (or cannot be bound): a user message."""


class DashboardServer:
    def __init__(self, config: WebConfig, app: FastAPI | None = None) -> None:
        if app is None:
            from assay.web.app import create_app

            app = create_app(config)
        self.config = config
        self.app = app
        self.port = config.port
        self._socket: socket.socket | None = None
        self._server: object | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self.error: BaseException | None = None

    @property
    def url(self) -> str:
        host = self.config.host
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}/"

    def start(self) -> None:
        """Bind, then serve in a daemon thread; returns once uvicorn accepts connections."""
        import uvicorn

        self._socket = bind(self.config.host, self.config.port)
        self.port = self._socket.getsockname()[1]
        server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                log_level="warning",
                access_log=False,
                lifespan="off",
                timeout_graceful_shutdown=GRACEFUL_SECONDS,
            )
        )
        self._server = server
        self._thread = threading.Thread(target=self._serve, name="assay-dashboard", daemon=True)
        self._thread.start()
        if not self._started.wait(START_TIMEOUT) or self.error is not None:
            self.stop()
            raise PortTaken(f"the dashboard did not start on {self.url}: {self.error}")

    def _serve(self) -> None:
        import uvicorn

        server = self._server
        assert isinstance(server, uvicorn.Server) and self._socket is not None

        async def serving() -> None:
            self._loop = asyncio.get_running_loop()
            watch = asyncio.create_task(_signal_started(server, self._started))
            try:
                await server.serve(sockets=[self._socket] if self._socket else None)
            finally:
                watch.cancel()

        try:
            asyncio.run(serving())
        except BaseException as exc:  # reported by start(); the thread must not die silently
            self.error = exc
            self._started.set()

    def stop(self, timeout: float = 10.0) -> None:
        """Close the live streams and stop uvicorn; idempotent."""
        import uvicorn

        from assay.web.live import close_streams

        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended meanwhile
                loop.call_soon_threadsafe(close_streams, self.app)
        if isinstance(self._server, uvicorn.Server):
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        if self._socket is not None:
            self._socket.close()
            self._socket = None


async def _signal_started(server: object, started: threading.Event) -> None:
    while not getattr(server, "started", False):
        await asyncio.sleep(0.02)
    started.set()


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, or :class:`PortTaken` saying why not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise PortTaken(f"cannot bind the dashboard to {host}: {exc.strerror}") from exc
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortTaken(
                f"port {port} on {host} is already in use: choose another with --web-port "
                "(or --no-web)"
            ) from exc
        raise PortTaken(f"cannot bind the dashboard to {host}:{port}: {exc.strerror}") from exc
    sock.setblocking(False)
    return sock
