"""Relaying connections: the splice the host's egress proxy and the seat's forwarder both use,
and the forwarder itself (started by :mod:`assay.adapters.netforward`, whose docstring says
what it does), inside the sandbox's own network namespace.

Standard library only, and loaded by the forwarder as a top-level module from this folder
(its bytecode cached, unlike a script's): every seat pays for the forwarder's start, and most
of it would be imports (``socket``, ``signal`` and ``json`` bring ``enum`` and ``re``: some
40 ms inside a sandbox on a busy machine). So the way to ``exec`` uses the C modules beneath
them (``_socket``, ``_signal``, ``_json``'s scanner); the server, after the fork, uses
``_thread`` and ``_socket`` too (a program that ends at once waits for the server to notice),
and type names are imported only for the type checker.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # (no stub: the C module beneath `signal`)
import _socket
import errno
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # (not `typing.TYPE_CHECKING`: importing typing costs a seat's start too)
    import _thread
    from collections.abc import Sequence
    from typing import Any, NoReturn, TypeGuard

# A model's streamed answer may pause for minutes between bursts: a tunnel ends only when
# neither direction moved for this long.
IDLE_TIMEOUT = 900.0
HANDSHAKE_TIMEOUT = 60.0  # the proxy resolves and connects (with its own timeout) meanwhile
MAX_HEAD = 64 * 1024
CHUNK = 64 * 1024
BAD_USAGE, CANNOT_EXECUTE, NOT_FOUND = 125, 126, 127
_BACKLOG = 128
_NAME = "assay netforward"  # its messages
_TRANSIENT = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


def splice(left: _socket.socket, right: _socket.socket, idle: float = IDLE_TIMEOUT) -> None:
    """Copy bytes both ways as they arrive (no buffering beyond one read) until both directions
    ended, then return; the caller closes both sockets.

    When one side ends its sending, the other side's sending is shut (``SHUT_WR``) and the
    opposite direction goes on: a half-closed connection keeps working. An error on either
    side, or ``idle`` seconds without a byte in either direction, ends both."""
    import _thread
    import time

    for sock in (left, right):  # a relay passes on what came at once: no Nagle delay
        if sock.family in (_socket.AF_INET, _socket.AF_INET6):
            sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
    last = [time.monotonic()]
    left.settimeout(idle)
    right.settimeout(idle)
    back_done = _thread.allocate_lock()
    back_done.acquire()
    _thread.start_new_thread(_pump, (right, left, idle, last, back_done))
    _pump(left, right, idle, last, None)
    back_done.acquire()  # released as the other direction ends


def _pump(
    src: _socket.socket,
    dst: _socket.socket,
    idle: float,
    last: list[float],
    done: _thread.LockType | None,
) -> None:
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
                dst.shutdown(_socket.SHUT_WR)
                return
            last[0] = time.monotonic()
            dst.sendall(view[:count])
    except OSError:
        # Reset, refused write, idle, or a stop: the other direction must end too.
        for sock in (src, dst):
            shut(sock)
    finally:
        if done is not None:
            done.release()


def shut(sock: _socket.socket) -> None:
    """Shut both directions of ``sock``: wakes any thread blocked on it; never raises."""
    try:  # noqa: SIM105 (contextlib would cost every seat's start an import)
        sock.shutdown(_socket.SHUT_RDWR)
    except OSError:
        pass


def read_head(sock: _socket.socket, timeout: float, limit: int = MAX_HEAD) -> tuple[bytes, bytes]:
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
        if hasattr(_signal, name):
            _signal.signal(getattr(_signal, name), _signal.SIG_DFL)
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
        config = _json_value(text)
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


def _json_value(text: str) -> Any:
    """``json.loads(text)`` by the C scanner ``json`` itself uses, without importing ``json``
    (and ``re``); ValueError when ``text`` is not one JSON value."""
    try:
        from _json import make_scanner
    except ImportError:  # a Python without the accelerator
        import json

        return json.loads(text)

    def constant(name: str) -> float:
        raise ValueError(f"{name} is not JSON")

    class Context:  # the settings json.JSONDecoder hands the scanner
        strict = True
        object_hook = object_pairs_hook = None
        parse_float, parse_int, parse_constant = float, int, constant

    text = text.strip()
    try:
        value, end = make_scanner(Context())(text, 0)  # type: ignore[arg-type]
    except StopIteration:
        raise ValueError("no JSON value") from None
    if end != len(text):
        raise ValueError("more than one JSON value")
    return value


def _is_port(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536


def _loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        packed = _socket.inet_pton(_socket.AF_INET6 if ":" in host else _socket.AF_INET, host)
    except (OSError, ValueError):
        return False
    return packed[0] == 127 if len(packed) == 4 else packed == bytes(15) + b"\x01"


def _bind(port: int, tunnels: Sequence[tuple[str, int]]) -> list[tuple[_socket.socket, str]]:
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
    listeners: list[tuple[_socket.socket, str]] = []
    for host, listen_port, connect_to, required in wanted:
        try:
            listeners.append((_listener(host, listen_port), connect_to))
        except OSError as exc:
            if required:
                for sock, _ in listeners:
                    sock.close()
                raise OSError(f"cannot listen on {hostport(host, listen_port)}: {exc}") from None
    return listeners


def _listener(host: str, port: int) -> _socket.socket:
    family = _socket.AF_INET6 if ":" in host else _socket.AF_INET
    sock = _socket.socket(family, _socket.SOCK_STREAM)
    try:
        sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        if family == _socket.AF_INET6:
            sock.setsockopt(_socket.IPPROTO_IPV6, _socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen(_BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def _start_server(path: str, listeners: list[tuple[_socket.socket, str]], program: int) -> None:
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


def _serve(path: str, listeners: list[tuple[_socket.socket, str]], program: int) -> NoReturn:
    """The server: a thread per listener and per connection (``_thread``: a short program
    must not wait for the server to import ``threading`` before it can end), until the
    program ends."""
    import _thread

    try:
        # The program's output must end when the program does: hold none of its pipes.
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        for sock, connect_to in listeners:
            _thread.start_new_thread(_accept, (sock, path, connect_to))
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


def _accept(listener: _socket.socket, path: str, connect_to: str) -> None:
    import _thread
    import time

    while True:
        try:
            fd, _ = listener._accept()  # type: ignore[attr-defined]  # (what socket.accept calls)
            conn = _socket.socket(fileno=fd)
        except (ConnectionError, InterruptedError):
            continue  # a client that left before it was accepted
        except OSError as exc:
            if exc.errno not in _TRANSIENT:
                return
            time.sleep(0.05)  # out of descriptors or memory for now: the backlog waits
            continue
        _thread.start_new_thread(_forward, (conn, path, connect_to))


def _forward(conn: _socket.socket, path: str, connect_to: str) -> None:
    upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
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
