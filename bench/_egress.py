"""The pieces of the egress benchmark: a host server that streams a model-like SSE answer at a
set rate (or bulk bytes as fast as it can), and the client that reads it, on the host directly
or inside a sandbox through the seat's forwarder and the egress proxy."""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import parse_qs, urlsplit

EVENT_BYTES = 4096


class StreamServer:
    """``GET /sse?rate=B&seconds=S``: ``data: <send time ns> <padding>`` events of
    :data:`EVENT_BYTES`, paced to B bytes a second for S seconds; ``GET /bulk?bytes=N``: N
    bytes as fast as the socket takes them. HTTP/1.0, the connection closes at the end."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        threading.Thread(target=self._loop, daemon=True).start()

    def __enter__(self) -> StreamServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.listener.close()

    def _loop(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            # As model servers do (asyncio's transports, uvicorn): Nagle's algorithm would hold
            # an event until the previous one is acknowledged, up to a delayed ACK's 40 ms.
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            target = urlsplit(head.split(b" ")[1].decode())
            query = {key: float(values[0]) for key, values in parse_qs(target.query).items()}
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
            if target.path == "/sse":
                self._events(conn, query["rate"], query["seconds"])
            else:
                self._bulk(conn, int(query["bytes"]))

    @staticmethod
    def _events(conn: socket.socket, rate: float, seconds: float) -> None:
        count = int(rate * seconds / EVENT_BYTES)
        start = time.monotonic()
        for n in range(count):
            wait = start + n * EVENT_BYTES / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            stamp = f"data: {time.time_ns()} ".encode()
            conn.sendall(stamp + b"x" * (EVENT_BYTES - len(stamp) - 2) + b"\n\n")

    @staticmethod
    def _bulk(conn: socket.socket, total: int) -> None:
        block = memoryview(b"y" * (1 << 20))
        while total > 0:
            conn.sendall(block[: min(total, len(block))])
            total -= len(block)


# Run as `python -c CLIENT MODE VIA PORT QUERY`: VIA is `proxy` (CONNECT through the seat's
# forwarder at 127.0.0.1:PROXY_PORT, as an HTTPS client would) or `direct`. Prints JSON.
CLIENT = r"""
import json, socket, statistics, sys, time
mode, via, port, query, proxy_port = sys.argv[1:6]
port, proxy_port = int(port), int(proxy_port)
if via == "proxy":
    sock = socket.create_connection(("127.0.0.1", proxy_port), timeout=60)
    sock.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
else:
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
started = time.perf_counter()
sock.sendall(f"GET /{mode}?{query} HTTP/1.0\r\nHost: bench\r\n\r\n".encode())
buffer = bytearray(1 << 20)
total, first, last, pending, delays = 0, None, None, b"", []
while True:
    count = sock.recv_into(buffer)
    if not count:
        break
    now = time.perf_counter()
    first = first or now
    last = now
    total += count
    if mode == "sse":
        arrived = time.time_ns()
        pending += bytes(buffer[:count])
        *events, pending = pending.split(b"\n\n")
        for event in events:
            if event.startswith(b"data: "):
                delays.append((arrived - int(event.split(b" ")[1])) / 1e6)
seconds = (last - first) if mode == "sse" else (last - started)
figures = {"bytes": total, "seconds": seconds, "mb_per_s": total / seconds / 1e6}
if delays:
    delays.sort()
    figures.update(events=len(delays), delay_median_ms=statistics.median(delays),
                   delay_p99_ms=delays[int(len(delays) * 0.99) - 1], delay_max_ms=delays[-1])
print(json.dumps(figures))
"""
