"""What a client asks the egress proxy for, read from its request head, and the proxy's
error answers: no I/O here beyond the bytes given."""

from __future__ import annotations

import re
from dataclasses import dataclass

_SHOWN = 100
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # every control character but TAB
_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    408: "Request Timeout",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


@dataclass(frozen=True)
class ProxyRequest:
    """What a client asked the proxy for; ``forwarded`` is the head to send the origin (empty
    for CONNECT)."""

    host: str
    port: int
    connect: bool
    forwarded: bytes = b""


def parse_request(head: bytes) -> ProxyRequest:
    """The request in an HTTP head (without its blank line); ValueError saying what is wrong."""
    text = head.decode("latin-1")
    line, *fields = text.split("\r\n")
    if any(_CONTROL.search(part) for part in (line, *fields)):
        # A bare CR or LF (or NUL...) that the origin may read as a line end would let a client
        # slip a header past the proxy, a second Host among them.
        raise ValueError("a control character in the request head")
    parts = line.split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
        raise ValueError("expected METHOD TARGET HTTP/1.1")
    method, request_target, version = parts
    if not method.isascii() or not method.isalpha() or not method.isupper():
        raise ValueError(f"{printable(method)} is no HTTP method")
    headers = [_header(field) for field in fields]
    if method == "CONNECT":
        host, port = _authority(request_target, None)
        return ProxyRequest(host, port, connect=True)
    scheme, sep, rest = request_target.partition("://")
    if not sep or scheme.lower() != "http":
        raise ValueError(
            "only CONNECT host:port, or an absolute http:// URL, goes to a proxy "
            "(for https, a client sends CONNECT)"
        )
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, path = rest[:cut], rest[cut:].partition("#")[0]
    host, port = _authority(authority, 80)
    if not path.startswith("/"):
        path = "/" + path
    kept = [
        (name, value)
        for name, value in headers
        if name.lower() not in ("host", "connection", "keep-alive")
        and not name.lower().startswith("proxy-")
    ]
    lines = [f"{method} {path} {version}", f"Host: {authority}"]
    lines += [f"{name}: {value}" for name, value in kept]
    lines.append("Connection: close")
    return ProxyRequest(
        host, port, connect=False, forwarded=("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    )


def _header(field: str) -> tuple[str, str]:
    name, sep, value = field.partition(":")
    if not sep or not name or name != name.strip() or " " in name:
        raise ValueError(f"malformed header line {printable(field)!r}")
    return name, value.strip()


def _authority(text: str, default: int | None) -> tuple[str, int]:
    """``host`` and port of ``host[:port]`` or ``[v6][:port]``."""
    if "@" in text:
        raise ValueError("a user name or password in the target")
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else None
        if not sep or (rest and port_text is None):
            raise ValueError(f"bad target {printable(text)!r}")
    else:
        host, sep, port_text_found = text.rpartition(":") if ":" in text else (text, "", "")
        port_text = port_text_found if sep else None
        if ":" in host:
            raise ValueError(f"an IPv6 address goes between brackets: {printable(text)!r}")
    if port_text is None:
        if default is None:
            raise ValueError("CONNECT needs host:port")
        return host, default
    if not port_text.isdigit() or not port_text.isascii() or not 0 < int(port_text) < 65536:
        raise ValueError(f"bad port in {printable(text)!r}")
    return host, int(port_text)


def response(status: int, message: str) -> bytes:
    """A complete plain-text response that ends the connection."""
    body = (message + "\n").encode("utf-8")
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def printable(text: str) -> str:
    """Client-supplied text made safe for a message: printable ASCII, cut short."""
    clean = "".join(c if " " < c < "\x7f" else "?" for c in text)
    return clean if len(clean) <= _SHOWN else clean[:_SHOWN] + "..."
