"""Relaying connections: the splice the host's egress proxy and the seat's forwarder both use,
and the forwarder itself (started by :mod:`assay.adapters.netforward`, whose docstring says
what it does), inside the sandbox's own network namespace.

Standard library only, and loaded by the forwarder as a top-level module from this folder
(its bytecode cached, unlike a script's): a seat pays for its start. So the forwarder's path to
``exec`` imports only what binding needs; what only its server needs is imported after the
fork (``threading``, ``select``, ``time``), and type names only for the type checker.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # (not `typing.TYPE_CHECKING`: importing typing costs a seat's start)
    from collections.abc import Sequence
    from typing import NoReturn, TypeGuard

# A model's streamed answer may pause for minutes between bursts: a tunnel ends only when
# neither direction moved for this long.
IDLE_TIMEOUT = 900.0
HANDSHAKE_TIMEOUT = 60.0  # the proxy resolves and connects (with its own timeout) meanwhile
MAX_HEAD = 64 * 1024
CHUNK = 64 * 1024
BAD_USAGE, CANNOT_EXECUTE, NOT_FOUND = 125, 126, 127
_BACKLOG = 128
_NAME = "assay netforward"  # its messages and threads
_TRANSIENT = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


def splice(left: socket.socket, right: socket.socket, idle: float = IDLE_TIMEOUT) -> None:
    """Copy bytes both ways as they arrive (no buffering beyond one read) until both directions
    ended, then return; the caller closes both sockets.

    When one side ends its sending, the other side's sending is shut (``SHUT_WR``) and the
    opposite direction goes on: a half-closed connection keeps working. An error on either
    side, or ``idle`` seconds without a byte in either direction, ends both."""
    import threading
    import time

    for sock in (left, right):  # a relay passes on what came at once: no Nagle delay
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    last = [time.monotonic()]
    left.settimeout(idle)
    right.settimeout(idle)
    back = threading.Thread(
        target=_pump, args=(right, left, idle, last), daemon=True, name=f"{_NAME} splice"
    )
    back.start()
    _pump(left, right, idle, last)
    back.join()


def _pump(src: socket.socket, dst: socket.socket, idle: float, last: list[float]) -> None:
    import time

    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    try:
        while True:
            try:
                count = src.recv_into(buffer)
            except TimeoutError:
                if time.monotonic() - last[0] < idle:
                    continue  # this direction is quiet, the other is not
                raise
            if count == 0:
                dst.shutdown(socket.SHUT_WR)
                return
            last[0] = time.monotonic()
            dst.sendall(view[:count])
    except OSError:
        # Reset, refused write, idle, or a stop: the other direction must end too.
        for sock in (src, dst):
            shut(sock)


def shut(sock: socket.socket) -> None:
    """Shut both directions of ``sock``: wakes any thread blocked on it; never raises."""
    try:  # noqa: SIM105 (contextlib would cost every seat's start an import)
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def read_head(sock: socket.socket, timeout: float, limit: int = MAX_HEAD) -> tuple[bytes, bytes]:
    """An HTTP head (up to and without its blank line) and the bytes read past it.

    ValueError when it is longer than ``limit`` or the peer ends first; TimeoutError when it
    takes longer than ``timeout`` in all (a peer sending one byte a minute is not waited on)."""
    import time

    deadline = time.monotonic() + timeout
    data = bytearray()
    while True:
        end = data.find(b"\r\n\r\n", max(0, len(data) - CHUNK - 3))
        if end > limit or (end < 0 and len(data) > limit):
            raise ValueError(f"the head is longer than {limit // 1024} KiB")
        if end >= 0:
            return bytes(data[:end]), bytes(data[end + 4 :])
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the head took too long")
        sock.settimeout(remaining)
        chunk = sock.recv(CHUNK)
        if not chunk:
            raise ValueError("the connection ended before the head did")
        data += chunk


def hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# --- inside the sandbox -------------------------------------------------------------------


def main(args: Sequence[str]) -> NoReturn:
    """Parse the configuration, bind, start the server, and become the program."""
    if len(args) < 2:
        _fail("usage: netforward.py CONFIG-JSON PROGRAM [ARGS...]", BAD_USAGE)
    try:
        path, port, tunnels = _config(args[0])
    except ValueError as exc:
        _fail(f"bad configuration: {exc}", BAD_USAGE)
    try:
        listeners = _bind(port, tunnels)
    except OSError as exc:
        _fail(str(exc), BAD_USAGE)
    try:
        _start_server(path, listeners, os.getpid())
    except OSError as exc:
        _fail(f"cannot start: {exc}", BAD_USAGE)
    for sock, _ in listeners:
        sock.close()
    program = list(args[1:])
    # Python ignores these for itself; an ignored signal survives exec, and the program must
    # start as it would from a shell (a `yes | head` inside it ends by SIGPIPE, not an error).
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execvp(program[0], program)
    except (FileNotFoundError, NotADirectoryError):
        _fail(f"{program[0]}: command not found", NOT_FOUND)
    except OSError as exc:
        _fail(f"{program[0]}: cannot execute: {exc.strerror or exc}", CANNOT_EXECUTE)


def _fail(message: str, code: int) -> NoReturn:
    print(f"{_NAME}: {message}", file=sys.stderr, flush=True)
    os._exit(code)


def _config(text: str) -> tuple[str, int, list[tuple[str, int]]]:
    try:
        config = json.loads(text)
    except ValueError:
        raise ValueError("the first argument is not JSON") from None
    if not isinstance(config, dict) or not set(config) <= {"socket", "port", "tunnels"}:
        raise ValueError('expected an object with "socket", "port" and "tunnels"')
    path, port, tunnels = config.get("socket"), config.get("port"), config.get("tunnels", [])
    if not isinstance(path, str) or not os.path.isabs(path):
        raise ValueError('"socket" must be an absolute path')
    if not _is_port(port):
        raise ValueError('"port" must be a port number (1-65535)')
    found: list[tuple[str, int]] = []
    if not isinstance(tunnels, list):
        raise ValueError('"tunnels" must be a list of [host, port]')
    for tunnel in tunnels:
        if not (isinstance(tunnel, list) and len(tunnel) == 2 and _is_port(tunnel[1])):
            raise ValueError(f"tunnel {tunnel!r} is not [host, port]")
        host = tunnel[0]
        if not isinstance(host, str) or not _loopback(host):
            raise ValueError(f"tunnel host {host!r} is not a loopback address or localhost")
        found.append((host, tunnel[1]))
    return path, port, found


def _is_port(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536


def _loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        packed = socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    except (OSError, ValueError):
        return False
    return packed[0] == 127 if len(packed) == 4 else packed == bytes(15) + b"\x01"


def _bind(port: int, tunnels: Sequence[tuple[str, int]]) -> list[tuple[socket.socket, str]]:
    """Every listener: the proxy's (``""`` for a raw splice) and each tunnel's (its CONNECT
    target). A missing IPv6 loopback only skips the ``[::1]`` listeners it makes optional."""
    wanted: list[tuple[str, int, str, bool]] = [
        ("127.0.0.1", port, "", True),
        ("::1", port, "", False),
    ]
    for host, tunnel_port in tunnels:
        connect_to = hostport(host, tunnel_port)
        if host == "localhost":
            wanted += [("127.0.0.1", tunnel_port, connect_to, True)]
            wanted += [("::1", tunnel_port, connect_to, False)]
        else:
            wanted.append((host, tunnel_port, connect_to, True))
    listeners: list[tuple[socket.socket, str]] = []
    for host, listen_port, connect_to, required in wanted:
        try:
            listeners.append((_listener(host, listen_port), connect_to))
        except OSError as exc:
            if required:
                for sock, _ in listeners:
                    sock.close()
                raise OSError(f"cannot listen on {hostport(host, listen_port)}: {exc}") from None
    return listeners


def _listener(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen(_BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def _start_server(path: str, listeners: list[tuple[socket.socket, str]], program: int) -> None:
    """Fork the server off twice and reap the middle process, so the server is nobody's child
    the program knows of; it serves until process ``program`` ends."""
    middle = os.fork()
    if middle == 0:
        try:
            if os.fork() == 0:
                _serve(path, listeners, program)
        except BaseException:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(middle, 0)
    if status != 0:
        raise OSError("cannot fork the server")


def _serve(path: str, listeners: list[tuple[socket.socket, str]], program: int) -> NoReturn:
    import threading

    try:
        # The program's output must end when the program does: hold none of its pipes.
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        for sock, connect_to in listeners:
            threading.Thread(
                target=_accept, args=(sock, path, connect_to), daemon=True, name=_NAME
            ).start()
        _wait_for(program)
    finally:
        os._exit(0)


def _wait_for(pid: int) -> None:
    """Return once process ``pid`` has ended (a pidfd; polling where there is none)."""
    import select
    import time

    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            except PermissionError:
                pass
            time.sleep(0.2)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    while not poller.poll():
        pass


def _accept(listener: socket.socket, path: str, connect_to: str) -> None:
    import threading
    import time

    while True:
        try:
            conn, _ = listener.accept()
        except (ConnectionError, InterruptedError):
            continue  # a client that left before it was accepted
        except OSError as exc:
            if exc.errno not in _TRANSIENT:
                return
            time.sleep(0.05)  # out of descriptors or memory for now: the backlog waits
            continue
        threading.Thread(
            target=_forward, args=(conn, path, connect_to), daemon=True, name=_NAME
        ).start()


def _forward(conn: socket.socket, path: str, connect_to: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.settimeout(HANDSHAKE_TIMEOUT)
        upstream.connect(path)
        if connect_to:
            request = f"CONNECT {connect_to} HTTP/1.1\r\nHost: {connect_to}\r\n\r\n"
            upstream.sendall(request.encode("ascii"))
            head, early = read_head(upstream, HANDSHAKE_TIMEOUT)
            status = head.split(b"\r\n", 1)[0].split(b" ")
            if len(status) < 2 or status[1] != b"200":
                return
            if early:  # an origin that speaks first (a banner) already did
                conn.sendall(early)
        splice(conn, upstream)
    except (OSError, ValueError):
        pass
    finally:
        conn.close()
        upstream.close()
