"""The egress proxy with real sockets: what it lets through (CONNECT and plain HTTP, streamed,
half-closed), what it refuses (names not allowed, names resolving to this host or its link,
malformed requests) and that ``stop()`` ends everything."""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from assay.adapters.egress_proxy import EgressProxy
from assay.adapters.proxy_request import parse_request
from assay.core.egress import AllowRule, parse_rule

TIMEOUT = 5.0


class Origin:
    """A TCP server on 127.0.0.1 that runs ``handle`` for each connection in a thread."""

    def __init__(self, handle: Callable[[socket.socket], object]) -> None:
        self.handle = handle
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(TIMEOUT)
            self.handle(conn)

    def close(self) -> None:
        self.listener.close()


def count_until_eof(conn: socket.socket) -> None:
    """Read until the client's end of sending, then answer how much came (half-close)."""
    total = 0
    while chunk := conn.recv(65536):
        total += len(chunk)
    conn.sendall(f"got {total} bytes".encode())


@pytest.fixture
def folder() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ep-", dir="/tmp"))  # a unix socket's path is short
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def counter() -> Iterator[Origin]:
    origin = Origin(count_until_eof)
    yield origin
    origin.close()


def proxy_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("assay ")]


def connect(proxy: EgressProxy) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(TIMEOUT)
    sock.connect(str(proxy.socket_path))
    return sock


def read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def read_head(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(1)
        assert chunk, f"the proxy closed before answering: {data!r}"
        data += chunk
    return data


def ask(proxy: EgressProxy, request: bytes) -> bytes:
    with connect(proxy) as sock:
        sock.sendall(request)
        return read_all(sock)


def no_resolver(host: str, port: int) -> list[str]:
    raise AssertionError(f"the resolver was asked for {host}:{port}")


def test_an_allowed_connect_splices_both_ways_and_half_closes(
    folder: Path, counter: Origin
) -> None:
    rules = [AllowRule("127.0.0.1", counter.port)]
    with EgressProxy(rules, folder / "p.sock", resolve=no_resolver) as proxy:
        with connect(proxy) as sock:
            sock.sendall(f"CONNECT 127.0.0.1:{counter.port} HTTP/1.1\r\n\r\n".encode())
            assert read_head(sock) == b"HTTP/1.1 200 Connection established\r\n\r\n"
            sock.sendall(b"x" * 300_000)
            sock.shutdown(socket.SHUT_WR)  # the origin answers only after our end
            assert read_all(sock) == b"got 300000 bytes"
        assert proxy.served == 1
        assert proxy.refused == []
    assert not (folder / "p.sock").exists()


def test_bytes_sent_right_after_connect_reach_the_origin(folder: Path, counter: Origin) -> None:
    rules = [AllowRule("127.0.0.1", counter.port)]
    with EgressProxy(rules, folder / "p.sock") as proxy, connect(proxy) as sock:
        sock.sendall(f"CONNECT 127.0.0.1:{counter.port} HTTP/1.1\r\n\r\nearly".encode())
        read_head(sock)
        sock.shutdown(socket.SHUT_WR)
        assert read_all(sock) == b"got 5 bytes"


class EchoHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"path": self.path, "headers": dict(self.headers.items())}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def web() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EchoHandler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_a_plain_http_request_goes_to_the_origin_in_origin_form(folder: Path, web: int) -> None:
    with EgressProxy([AllowRule("localhost", web)], folder / "p.sock") as proxy:
        answer = ask(
            proxy,
            f"GET http://LOCALHOST:{web}/hello?x=1 HTTP/1.1\r\nHost: elsewhere.example\r\n"
            "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n"
            "Accept: */*\r\n\r\n".encode(),
        )
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200"), answer
    seen = json.loads(body)
    assert seen["path"] == "/hello?x=1"
    headers = {k.lower(): v for k, v in seen["headers"].items()}
    assert headers["host"] == f"LOCALHOST:{web}"  # the target's, not the one the client wrote
    assert headers["accept"] == "*/*"
    assert headers["connection"] == "close"
    assert not [k for k in headers if k.startswith("proxy-")]


def test_a_host_not_allowed_is_refused_with_a_message_and_recorded(folder: Path) -> None:
    rules = [parse_rule("api.example.test")]
    with EgressProxy(rules, folder / "p.sock", resolve=no_resolver) as proxy:
        answer = ask(proxy, b"CONNECT other.example.test:443 HTTP/1.1\r\n\r\n")
        plain = ask(proxy, b"GET http://api.example.test:8080/ HTTP/1.1\r\n\r\n")
        assert proxy.refused == ["other.example.test:443", "api.example.test:8080"]
        assert proxy.served == 0
    assert answer.startswith(b"HTTP/1.1 403 Forbidden\r\n")
    assert answer.endswith(
        b"\r\n\r\nassay: egress to other.example.test:443 is not allowed for this seat; "
        b"allow it under network.allow in the contract\n"
    )
    assert plain.startswith(b"HTTP/1.1 403 ")


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "::1", "::ffff:127.0.0.1", "0.0.0.0", "169.254.169.254", "fe80::1", "224.0.0.1"],
)
def test_a_name_resolving_to_this_host_or_its_link_is_refused(
    folder: Path, counter: Origin, address: str
) -> None:
    asked: list[tuple[str, int]] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return [address]

    rules = [parse_rule(f"model.example.test:{counter.port}"), parse_rule("*.example.test")]
    with EgressProxy(rules, folder / "p.sock", resolve=resolve) as proxy:
        answer = ask(proxy, f"CONNECT model.example.test:{counter.port} HTTP/1.1\r\n\r\n".encode())
        metadata = ask(proxy, b"GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\n\r\n")
        assert proxy.refused == [f"model.example.test:{counter.port}", "169.254.169.254:80"]
    assert answer.startswith(b"HTTP/1.1 403 ")
    assert f"it resolves to {address}".encode() in answer
    assert metadata.startswith(b"HTTP/1.1 403 ")
    assert asked == [("model.example.test", counter.port)]  # resolved once, by the proxy
    assert counter.accepted == 0


def own_address() -> str:
    """A non-loopback address of this machine (the one its default route leaves from)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("198.51.100.1", 9))  # TEST-NET-2: only the route is looked up
            address = str(probe.getsockname()[0])
    except OSError:
        pytest.skip("this machine has no route off its loopback")
    if address.startswith("127."):
        pytest.skip("this machine has no address but loopback")
    return address


def test_a_name_resolving_to_an_address_of_this_machine_is_refused(folder: Path) -> None:
    """A service bound to 0.0.0.0 answers on the machine's LAN address too: a name that
    resolves there is the host itself, not a machine of the network."""
    address = own_address()
    with socket.create_server(("0.0.0.0", 0)) as service:
        port = service.getsockname()[1]
        rules = [AllowRule("model.example.test", port), AllowRule(address, port)]
        resolve = lambda host, port: [address]  # noqa: E731
        with EgressProxy(rules, folder / "p.sock", resolve=resolve) as proxy:
            by_name = ask(proxy, f"CONNECT model.example.test:{port} HTTP/1.1\r\n\r\n".encode())
            with connect(proxy) as sock:  # the rule naming the address itself still reaches it
                sock.sendall(f"CONNECT {address}:{port} HTTP/1.1\r\n\r\n".encode())
                assert read_head(sock).startswith(b"HTTP/1.1 200 ")
    assert by_name.startswith(b"HTTP/1.1 403 "), by_name
    assert f"it resolves to {address}".encode() in by_name


def test_the_proxy_connects_to_the_address_it_checked(folder: Path, counter: Origin) -> None:
    """A name that resolves to loopback first and to a remote address next is never let
    through to loopback: the loopback answer is skipped, not retried by another lookup."""

    def resolve(host: str, port: int) -> list[str]:
        return ["127.0.0.1", "192.0.2.1"]  # TEST-NET-1: unreachable

    rules = [AllowRule("model.example.test", counter.port)]
    with EgressProxy(rules, folder / "p.sock", resolve=resolve, connect_timeout=0.3) as proxy:
        answer = ask(proxy, f"CONNECT model.example.test:{counter.port} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 502 Bad Gateway"), answer
    assert counter.accepted == 0


def test_localhost_and_a_literal_address_rule_reach_a_loopback_server(
    folder: Path, counter: Origin
) -> None:
    rules = [AllowRule("localhost", counter.port)]
    resolve = lambda host, port: ["127.0.0.1"]  # noqa: E731
    with EgressProxy(rules, folder / "p.sock", resolve=resolve) as proxy, connect(proxy) as sock:
        sock.sendall(f"CONNECT localhost:{counter.port} HTTP/1.1\r\n\r\n".encode())
        assert read_head(sock).startswith(b"HTTP/1.1 200 ")
        sock.shutdown(socket.SHUT_WR)
        assert read_all(sock) == b"got 0 bytes"


def test_an_unreachable_origin_is_a_502(folder: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as spare:
        port = spare.getsockname()[1]  # closed on leaving: nothing listens there after
    with EgressProxy([AllowRule("127.0.0.1", port)], folder / "p.sock") as proxy:
        answer = ask(proxy, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 502 Bad Gateway\r\n")
    assert f"cannot reach 127.0.0.1:{port}".encode() in answer


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET http://a.example.test/ HTTP/1.1\r\nX: " + b"y" * 70_000 + b"\r\n\r\n",
        b"GET http://a.example.test/ HTTP/1.1\r\nX: " + b"y" * 70_000,  # and no end at all
        b"hello\r\n\r\n",
        b"GET /origin-form HTTP/1.1\r\nHost: a.example.test\r\n\r\n",
        b"GET https://a.example.test/ HTTP/1.1\r\n\r\n",
        b"CONNECT a.example.test HTTP/1.1\r\n\r\n",
        b"CONNECT a.example.test:99999 HTTP/1.1\r\n\r\n",
        b"CONNECT user@a.example.test:443 HTTP/1.1\r\n\r\n",
        b"GET http://a.example.test/ HTTP/2\r\n\r\n",
        b"GET http://a.example.test/ HTTP/1.1\r\nno colon here\r\n\r\n",
        # a bare LF, CR or NUL the origin may take for a line end: a header smuggled past
        b"GET http://a.example.test/ HTTP/1.1\r\nX: a\nHost: other.test\r\n\r\n",
        b"GET http://a.example.test/ HTTP/1.1\r\nX: a\r\r\n\nHost: other.test\r\n\r\n",
        b"GET http://a.example.test/ HTTP/1.1\r\nX: a\rHost: other.test\r\n\r\n",
        b"GET http://a.example.test/ HTTP/1.1\r\nX: a\x00b\r\n\r\n",
        b"GET http://a.example.test/x\rHost:other.test HTTP/1.1\r\n\r\n",
    ],
)
def test_what_is_no_proxy_request_is_a_400(folder: Path, request_bytes: bytes) -> None:
    rules = [parse_rule("*.example.test")]
    with EgressProxy(rules, folder / "p.sock", resolve=no_resolver) as proxy:
        answer = ask(proxy, request_bytes)
        assert proxy.served == 0
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer


def test_concurrent_connections_are_counted_exactly(folder: Path, counter: Origin) -> None:
    rules = [AllowRule("127.0.0.1", counter.port)]
    answers: list[bytes] = []

    def both(n: int) -> None:
        with connect(proxy) as sock:
            sock.sendall(f"CONNECT 127.0.0.1:{counter.port} HTTP/1.1\r\n\r\n".encode())
            read_head(sock)
            sock.sendall(b"z" * n)
            sock.shutdown(socket.SHUT_WR)
            answers.append(read_all(sock))
        answers.append(ask(proxy, f"CONNECT refused-{n}.test:443 HTTP/1.1\r\n\r\n".encode()))

    with EgressProxy(rules, folder / "p.sock", resolve=no_resolver) as proxy:
        workers = [threading.Thread(target=both, args=(n,)) for n in range(60)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert proxy.served == 60
        assert sorted(proxy.refused) == sorted(f"refused-{n}.test:443" for n in range(60))
        for n in range(60, 110):
            ask(proxy, f"CONNECT refused-{n}.test:443 HTTP/1.1\r\n\r\n".encode())
        assert len(proxy.refused) == 100  # the last hundred, oldest first
        assert proxy.refused[-1] == "refused-109.test:443"
    assert sorted(a for a in answers if a.startswith(b"got")) == sorted(
        f"got {n} bytes".encode() for n in range(60)
    )
    assert proxy_threads() == []


def test_a_head_that_never_ends_times_out(folder: Path) -> None:
    with EgressProxy([], folder / "p.sock", head_timeout=0.3) as proxy, connect(proxy) as sock:
        sock.sendall(b"CONNECT a.example.test:443 HTTP/1.1\r\n")
        assert read_all(sock).startswith(b"HTTP/1.1 408 ")


def test_a_stream_arrives_chunk_by_chunk(folder: Path) -> None:
    """The origin sends its second event only once the client has read the first: a proxy
    that buffered would never deliver it."""
    first_read = threading.Event()

    def stream(conn: socket.socket) -> None:
        conn.sendall(b"data: one\n\n")
        if first_read.wait(TIMEOUT):
            conn.sendall(b"data: two\n\n")

    origin = Origin(stream)
    try:
        rules = [AllowRule("127.0.0.1", origin.port)]
        with EgressProxy(rules, folder / "p.sock") as proxy, connect(proxy) as sock:
            sock.sendall(f"CONNECT 127.0.0.1:{origin.port} HTTP/1.1\r\n\r\n".encode())
            read_head(sock)
            assert sock.recv(100) == b"data: one\n\n"
            first_read.set()
            assert read_all(sock) == b"data: two\n\n"
    finally:
        origin.close()


def test_stop_ends_live_tunnels_and_leaves_no_thread(folder: Path) -> None:
    hold = threading.Event()
    origin = Origin(lambda conn: hold.wait(TIMEOUT * 2))
    proxy = EgressProxy([AllowRule("127.0.0.1", origin.port)], folder / "p.sock")
    proxy.start()
    tunnels = []
    try:
        for _ in range(3):
            sock = connect(proxy)
            sock.sendall(f"CONNECT 127.0.0.1:{origin.port} HTTP/1.1\r\n\r\n".encode())
            read_head(sock)
            tunnels.append(sock)
        started = time.monotonic()
        proxy.stop()
        assert time.monotonic() - started < 2
        for sock in tunnels:
            assert sock.recv(10) == b""  # ended by the proxy, not by the origin
        assert proxy_threads() == []
        assert not proxy.socket_path.exists()
        proxy.stop()  # a second stop does nothing
    finally:
        hold.set()
        for sock in tunnels:
            sock.close()
        origin.close()


def test_connections_over_the_limit_are_turned_away(folder: Path) -> None:
    proxy = EgressProxy([], folder / "p.sock", max_connections=1)
    with proxy, connect(proxy) as first, connect(proxy) as second:
        first.sendall(b"CONNECT")  # holds the only slot, its head unfinished
        assert read_all(second).startswith(b"HTTP/1.1 503 ")


def test_a_stale_socket_is_replaced_and_anything_else_is_kept(folder: Path) -> None:
    path = folder / "p.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()
    with EgressProxy([], path) as proxy:
        assert ask(proxy, b"x\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    path.write_text("a file")
    with pytest.raises(FileExistsError):
        EgressProxy([], path).start()
    assert path.read_text() == "a file"


def test_a_socket_path_too_long_for_unix_sockets_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="too long"):
        EgressProxy([], Path("/tmp") / ("x" * 120))


@pytest.mark.parametrize(
    ("head", "host", "port"),
    [
        (b"CONNECT [::1]:8080 HTTP/1.1", "::1", 8080),
        (b"CONNECT api.example.test:443 HTTP/1.1\r\nHost: x", "api.example.test", 443),
        (b"GET http://api.example.test HTTP/1.1", "api.example.test", 80),
        (b"POST http://[::1]:9000/v1?q HTTP/1.0", "::1", 9000),
    ],
)  # fmt: skip
def test_parse_request_finds_the_target(head: bytes, host: str, port: int) -> None:
    request = parse_request(head)
    assert (request.host, request.port) == (host, port)
    if not request.connect:
        assert request.forwarded.split(b" ", 2)[1].startswith(b"/")
