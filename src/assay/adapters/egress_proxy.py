"""The host's side of a seat's egress: an HTTP proxy on a unix socket that lets a connection
through only to what the seat's allowlist names.

The seat reaches it through the socket bound into its sandbox (see
:mod:`assay.adapters.netforward`, which turns the seat's loopback port into connections here).
It understands the two forms HTTP clients use with a proxy:

* ``CONNECT host:port HTTP/1.1`` (every HTTPS request): ``200 Connection established``, then
  the bytes are spliced both ways as they come;
* an absolute-form request, ``GET http://host[:port]/path HTTP/1.1`` (plain HTTP): the request
  goes to the origin in origin form (``GET /path``), with ``Host`` set to the target's (a
  client cannot name one host to the proxy and another to a shared front end), without the
  ``Proxy-*`` headers, with ``Connection: close``; then the rest is spliced both ways.

What is let through (:mod:`assay.core.egress`): a host and port some rule allows, at an address
the proxy resolved itself (the client's resolver is never asked) that is not on this host or
its link (loopback, an address of one of its interfaces, link-local like the cloud metadata
service at 169.254.169.254, multicast) unless the rule names that address, or ``localhost``.
The proxy connects to the very address it checked, so a name that resolves elsewhere a second
time (DNS rebinding) changes nothing.
Anything else is answered ``403`` (and recorded in :attr:`EgressProxy.refused`), ``400`` for
what is no proxy request (or a head over 64 KiB), ``502`` for an origin that cannot be reached.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import select
import socket
import stat
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

from assay.adapters.proxy_request import ProxyRequest, parse_request, printable, response
from assay.adapters.relay import (
    CHUNK,
    IDLE_TIMEOUT,
    MAX_HEAD,
    hostport,
    read_head,
    shut,
    splice,
)
from assay.core.egress import AllowRule, address_allowed, allowed_by, names_address

Resolver = Callable[[str, int], list[str]]
"""``(host, port)`` to the addresses to try, in order (``socket.getaddrinfo`` by default)."""

HEAD_TIMEOUT = 30.0
MAX_CONNECTIONS = 256
REFUSED_KEPT = 100
_SUN_PATH_MAX = 107  # sockaddr_un's path, without its terminating NUL
_STOP_WAIT = 5.0
_LINGER = 1.0


class EgressProxy:
    """An allowlisting HTTP proxy serving ``socket_path``, one thread per connection (two while
    it splices). ``start()`` binds and serves; ``stop()`` closes the listener and every live
    connection, waits for their threads and removes the socket. Use it as a context manager."""

    def __init__(
        self,
        rules: Sequence[AllowRule],
        socket_path: Path,
        *,
        connect_timeout: float = 10.0,
        resolve: Resolver | None = None,
        head_timeout: float = HEAD_TIMEOUT,
        idle_timeout: float = IDLE_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        if len(os.fsencode(socket_path)) > _SUN_PATH_MAX:
            raise ValueError(
                f"the proxy's socket path is too long for a unix socket "
                f"({len(os.fsencode(socket_path))} bytes, at most {_SUN_PATH_MAX}): {socket_path}"
            )
        self.rules = tuple(rules)
        self.socket_path = Path(socket_path)
        self.connect_timeout = connect_timeout
        self.head_timeout = head_timeout
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections
        self._resolve = resolve or resolve_addresses
        self._lock = threading.Lock()
        self._refused: deque[str] = deque(maxlen=REFUSED_KEPT)
        self._served = 0
        self._live: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._listener: socket.socket | None = None
        self._wake: tuple[socket.socket, socket.socket] | None = None
        self._acceptor: threading.Thread | None = None
        self._stopping = False

    @property
    def refused(self) -> list[str]:
        """The ``host:port`` targets refused, oldest first (the last :data:`REFUSED_KEPT`)."""
        with self._lock:
            return list(self._refused)

    @property
    def served(self) -> int:
        """How many connections were let through to an origin."""
        with self._lock:
            return self._served

    def start(self) -> None:
        if self._listener is not None:
            raise RuntimeError("the egress proxy is already started")
        _remove_stale_socket(self.socket_path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(self.socket_path))
            # Anyone who can reach the socket may use it: the folder it is in is what guards
            # it (only the seat's sandbox binds that folder).
            os.chmod(self.socket_path, 0o666)
            listener.listen(128)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        wake = socket.socketpair()
        acceptor = threading.Thread(
            target=self._accept_loop, args=(listener, wake[0]), daemon=True, name="assay egress"
        )
        with self._lock:
            self._listener, self._wake, self._acceptor = listener, wake, acceptor
            self._stopping = False
        acceptor.start()

    def stop(self) -> None:
        """Stop accepting, end every live connection (tunnels included), wait for the
        threads (a few seconds more than ``connect_timeout`` at most: a name lookup cannot be
        interrupted, its thread then ends on its own), and remove the socket. Calling it again
        does nothing."""
        with self._lock:
            listener, wake, acceptor = self._listener, self._wake, self._acceptor
            self._listener = self._wake = self._acceptor = None
            if listener is None or wake is None or acceptor is None:
                return
            self._stopping = True
            live = list(self._live)
        with contextlib.suppress(OSError):
            wake[1].send(b"x")
        acceptor.join()
        listener.close()
        for end in wake:
            end.close()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        for sock in live:
            shut(sock)
        with self._lock:
            threads = list(self._threads)
        deadline = time.monotonic() + _STOP_WAIT + self.connect_timeout
        for thread in threads:  # one deadline for all: many lookups may hang at once
            thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> EgressProxy:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # --- serving ---------------------------------------------------------------------------

    def _accept_loop(self, listener: socket.socket, wake: socket.socket) -> None:
        poller = select.poll()
        poller.register(listener, select.POLLIN)
        poller.register(wake, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if wake.fileno() in ready:
                return
            try:
                client, _ = listener.accept()
            except (BlockingIOError, ConnectionError, InterruptedError):
                continue
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    poller.poll(50)  # out of descriptors for now; the backlog waits
                    continue
                return
            self._start_connection(client)

    def _start_connection(self, client: socket.socket) -> None:
        client.settimeout(self.head_timeout)
        with self._lock:
            busy = len(self._threads) >= self.max_connections
            if not busy and not self._stopping:
                thread = threading.Thread(
                    target=self._serve, args=(client,), daemon=True, name="assay egress"
                )
                self._threads.add(thread)
                self._live.add(client)
                thread.start()
                return
        with contextlib.suppress(OSError):
            client.sendall(response(503, "assay: too many connections through this proxy"))
        client.close()

    def _serve(self, client: socket.socket) -> None:
        origin: socket.socket | None = None
        try:
            origin = self._open(client)
            if origin is not None:
                splice(client, origin, self.idle_timeout)
        except OSError:
            pass  # the client or the origin went away: nothing to answer
        finally:
            with self._lock:
                self._live.discard(client)
                if origin is not None:
                    self._live.discard(origin)
                self._threads.discard(threading.current_thread())
            client.close()
            if origin is not None:
                origin.close()

    def _open(self, client: socket.socket) -> socket.socket | None:
        """Read the request, check it, connect, and hand the client's first bytes on: the
        connected origin, or None once an error response was sent."""
        try:
            head, early = read_head(client, self.head_timeout, MAX_HEAD)
        except TimeoutError:
            _answer(client, 408, "assay: the request head took too long")
            return None
        except ValueError as exc:
            _answer(client, 400, f"assay: bad proxy request: {exc}")
            return None
        client.settimeout(self.head_timeout)  # what read_head left may be a sliver
        try:
            request = parse_request(head)
        except ValueError as exc:
            _answer(client, 400, f"assay: bad proxy request: {exc}")
            return None
        shown = hostport(printable(request.host), request.port)
        rule = allowed_by(self.rules, request.host, request.port)
        if rule is None:
            self._refuse(client, shown, "")
            return None
        origin = self._connect(client, rule, request, shown)
        if origin is None:
            return None
        try:
            if request.connect:
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if early:
                    origin.sendall(early)
            else:
                origin.sendall(request.forwarded + early)
        except OSError:
            with self._lock:
                self._live.discard(origin)
            origin.close()
            raise
        with self._lock:
            self._served += 1
        return origin

    def _connect(
        self, client: socket.socket, rule: AllowRule, request: ProxyRequest, shown: str
    ) -> socket.socket | None:
        try:
            addresses = _literal(request.host) or self._resolve(request.host, request.port)
        except (OSError, UnicodeError) as exc:
            _answer(client, 502, f"assay: cannot resolve {shown}: {_reason(exc)}")
            return None
        usable = [
            address
            for address in addresses
            if address_allowed(rule, address)
            and (names_address(rule, address) or not on_this_host(address))
        ]
        if not usable:
            why = f": it resolves to {', '.join(addresses[:3])}, on the host itself or its link"
            self._refuse(client, shown, why if addresses else ": it resolves to no address")
            return None
        failure: OSError | None = None
        for address in usable:
            origin = socket.socket(
                socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM
            )
            with self._lock:
                if self._stopping:
                    origin.close()
                    return None
                self._live.add(origin)
            try:
                origin.settimeout(self.connect_timeout)
                origin.connect((address, request.port))
                return origin
            except OSError as exc:
                failure = exc
                with self._lock:
                    self._live.discard(origin)
                origin.close()
        _answer(client, 502, f"assay: cannot reach {shown}: {_reason(failure)}")
        return None

    def _refuse(self, client: socket.socket, shown: str, why: str) -> None:
        with self._lock:
            self._refused.append(shown)
        _answer(
            client,
            403,
            f"assay: egress to {shown} is not allowed for this seat{why}; "
            "allow it under network.allow in the contract",
        )


def resolve_addresses(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, in the resolver's order, each once."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def on_this_host(address: str) -> bool:
    """Whether ``address`` is one of this machine's own (an interface's, such as the LAN
    address a service bound to 0.0.0.0 also answers on): the kernel routes a connection there
    from that very address. Asked of a UDP socket's route, so not a packet is sent."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((address, 9))
            source = probe.getsockname()[0]
    except OSError:
        return False  # no route at all: nothing of this host's is there
    try:
        return ipaddress.ip_address(source) == ipaddress.ip_address(address)
    except ValueError:
        return False


def _literal(host: str) -> list[str]:
    """An IP literal as the one address to try (no resolver asked); empty for a name."""
    try:
        return [ipaddress.ip_address(host).compressed]
    except ValueError:
        return []


def _answer(client: socket.socket, status: int, message: str) -> None:
    """Send an error response and end the connection gracefully: what the client still sends
    is read and dropped for a moment first, since closing a socket with unread bytes resets the
    connection and the client could lose the answer."""
    client.sendall(response(status, message))
    client.shutdown(socket.SHUT_WR)
    deadline = time.monotonic() + _LINGER
    with contextlib.suppress(OSError):
        while (left := deadline - time.monotonic()) > 0:
            client.settimeout(left)
            if not client.recv(CHUNK):
                return


def _reason(exc: BaseException | None) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _remove_stale_socket(path: Path) -> None:
    """A socket left at ``path`` by a proxy that did not stop is removed; anything else there
    is an error (FileExistsError), never overwritten."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise FileExistsError(f"{path} exists and is not a socket")
    path.unlink()
