"""Which hosts a seat may reach through its egress proxy: the allowlist's rules, their parser
and the matcher the proxy asks for every connection.

A rule is a host (a name, an IP literal, or ``*.example.com`` for the subdomains of
``example.com``, not ``example.com`` itself) and a port; a rule without a port allows 443 and
80. Rules are written as ``host``, ``host:port``, ``*.host[:port]``, ``[::1]:8080``, ``::1``
or a URL ``http(s)://host[:port][/path]`` (a URL allows exactly its port, 443 or 80 by scheme).

:func:`address_allowed` is the second half of the policy: once the proxy has resolved an
allowed name, an address on the host itself or its link (loopback, unspecified, link-local
such as a cloud's 169.254.169.254 metadata service, multicast) is refused unless the rule
named that very address, or ``localhost`` (then loopback only). A coder cannot reach the
host's services by asking for a name that resolves to 127.0.0.1.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_PORTS = (443, 80)
_SCHEME_PORTS = {"https": 443, "http": 80}
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_DIGITS = re.compile(r"[0-9]{1,5}")
_MAX_NAME = 253
_SHOWN = 80
_WILDCARD = "*."
_LOCALHOST = "localhost"
# Besides the named properties: "this network" (connecting to 0.x.x.x reaches this host on
# Linux) and the limited broadcast address.
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")
_BROADCAST = ipaddress.ip_address("255.255.255.255")


@dataclass(frozen=True)
class AllowRule:
    """One allowed destination; ``port`` None allows 443 and 80.

    ``host`` is stored normalised (lower case, no trailing dot, an IPv6 literal compressed and
    without brackets); an invalid host or port raises :class:`ValueError`.
    """

    host: str
    port: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "host", _rule_host(self.host))
        if self.port is not None and (
            isinstance(self.port, bool)
            or not isinstance(self.port, int)
            or not 0 < self.port < 65536
        ):
            raise ValueError(f"port {self.port!r} is not a port number (1-65535)")

    @property
    def wildcard(self) -> bool:
        return self.host.startswith(_WILDCARD)

    @property
    def ip_literal(self) -> bool:
        return _ip(self.host) is not None


def parse_rule(text: str) -> AllowRule:
    """The rule ``text`` writes; :class:`ValueError` with a one-line reason when it is none."""
    if not text:
        raise ValueError("an allowed host cannot be empty")
    if any(ch.isspace() for ch in text):
        raise ValueError(f"{_q(text)} contains whitespace: write a host, host:port or URL")
    if "://" in text:
        return _parse_url(text)
    if "/" in text or "@" in text:
        raise ValueError(f"{_q(text)}: write a host, host:port or an http(s):// URL")
    if text.startswith("["):
        host, port = _split_bracketed(text)
        if _ip(host) is None or ":" not in host:
            raise ValueError(f"{_q(text)}: only an IPv6 address goes between brackets")
        return _rule(host, port, text)
    colons = text.count(":")
    if colons >= 2:  # a bare IPv6 literal: it cannot carry a port without brackets
        return _rule(text, None, text)
    if colons == 1:
        name, _, port_text = text.partition(":")
        return _rule(name, _port(port_text, text), text)
    return _rule(text, None, text)


def rule_for_url(url: str) -> AllowRule | None:
    """The rule allowing exactly what ``url`` reaches (its host and port, the scheme's default
    port when it names none); None when ``url`` is not a well-formed http(s) URL with a host."""
    scheme, sep, _ = url.partition("://")
    if not sep or scheme.lower() not in _SCHEME_PORTS:
        return None
    try:
        return _parse_url(url)
    except ValueError:
        return None


def allowed_by(rules: Sequence[AllowRule], host: str, port: int) -> AllowRule | None:
    """The first of ``rules`` that allows ``host:port`` (case-insensitive, a trailing dot
    ignored, an IPv6 literal in any spelling, with or without brackets); None when none does or
    ``host`` is not a valid host name or IP literal."""
    wanted = _wanted_host(host)
    if wanted is None:
        return None
    for rule in rules:
        if not _port_matches(rule, port):
            continue
        if rule.wildcard:
            if wanted.endswith(rule.host[1:]):  # "*.example.com" -> ".example.com"
                return rule
        elif wanted == rule.host:
            return rule
    return None


def address_allowed(rule: AllowRule, address: str) -> bool:
    """Whether the proxy may connect to ``address``, one that ``rule``'s host resolved to: any
    public or private address, but an address on this host or its link only when the rule
    names that exact address (or ``localhost``, for a loopback address)."""
    ip = _ip(address)
    if ip is None:
        return False
    return not _local(ip) or names_address(rule, address)


def names_address(rule: AllowRule, address: str) -> bool:
    """Whether ``rule`` names ``address`` itself (its IP literal, in any spelling), or is
    ``localhost`` and ``address`` a loopback one: the only way to a local address."""
    ip = _ip(address)
    if ip is None:
        return False
    if rule.host == _LOCALHOST:
        return _unmapped(ip).is_loopback
    named = _ip(rule.host)
    return named is not None and _unmapped(named) == _unmapped(ip)


def shown(rule: AllowRule) -> str:
    """The rule as ``host:port`` or ``host``, in a form :func:`parse_rule` reads back."""
    if rule.port is None:
        return rule.host
    return target(rule.host, rule.port)


def target(host: str, port: int) -> str:
    """``host:port`` for messages, an IPv6 literal in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _parse_url(text: str) -> AllowRule:
    scheme, _, rest = text.partition("://")
    default = _SCHEME_PORTS.get(scheme.lower())
    if default is None:
        raise ValueError(f"{_q(text)}: only http:// and https:// URLs name an allowed host")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in authority:
        raise ValueError(f"{_q(text)}: a URL with a user name or password is not an allowed host")
    if not authority:
        raise ValueError(f"{_q(text)}: the URL names no host")
    if authority.startswith("["):
        host, port = _split_bracketed(authority)
        if _ip(host) is None or ":" not in host:
            raise ValueError(f"{_q(text)}: only an IPv6 address goes between brackets")
    elif authority.count(":") > 1:
        raise ValueError(f"{_q(text)}: an IPv6 address in a URL goes between brackets")
    else:
        host, sep, port_text = authority.partition(":")
        port = _port(port_text, text) if sep else None
    if host.startswith(_WILDCARD):
        raise ValueError(f"{_q(text)}: a URL names one host; write *.domain without a scheme")
    return _rule(host, default if port is None else port, text)


def _split_bracketed(text: str) -> tuple[str, int | None]:
    host, sep, rest = text[1:].partition("]")
    if not sep:
        raise ValueError(f"{_q(text)}: an opening bracket without its closing one")
    if not rest:
        return host, None
    if not rest.startswith(":"):
        raise ValueError(f"{_q(text)}: only :port may follow the brackets")
    return host, _port(rest[1:], text)


def _port(text: str, whole: str) -> int:
    if not _DIGITS.fullmatch(text) or not 0 < int(text) < 65536:
        raise ValueError(f"{_q(whole)}: {_q(text)} is not a port number (1-65535)")
    return int(text)


def _rule(host: str, port: int | None, whole: str) -> AllowRule:
    try:
        return AllowRule(host, port)
    except ValueError as exc:
        raise ValueError(f"{_q(whole)}: {exc}") from None


def _rule_host(host: str) -> str:
    """``host`` normalised, or ValueError saying why it is no allowed host."""
    if not isinstance(host, str) or not host:
        raise ValueError("the host is empty")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    ip = _ip(host)
    if ip is not None:
        return ip.compressed
    name = _ascii_name(host.lower().removesuffix("."))
    if name == "*":
        raise ValueError("'*' alone would allow every host: name the domain, as *.example.com")
    if name.startswith(_WILDCARD):
        domain = name[len(_WILDCARD) :]
        if _host_name(domain) is None:
            raise ValueError(f"{_q(host)} is not a wildcard over a valid domain name")
        if "." not in domain:
            raise ValueError(f"{_q(host)} covers a whole top-level domain: name the domain")
        return name
    if _host_name(name) is None:
        raise ValueError(f"{_q(host)} is not a valid host name or IP address")
    return name


def _host_name(name: str) -> str | None:
    """``name`` when it is a valid DNS host name (letters, digits, hyphens and, as some
    internal hosts have them, underscores; a last label that is not all digits)."""
    if not name or len(name) > _MAX_NAME or not name.isascii():
        return None
    labels = name.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels) or labels[-1].isdigit():
        return None
    return name


def _wanted_host(host: str) -> str | None:
    """The host a client asked for, normalised as rules are, or None when it is no host."""
    if not host or not isinstance(host, str):
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    ip = _ip(host)
    if ip is not None:
        return ip.compressed
    return _host_name(host.lower().removesuffix("."))


def _port_matches(rule: AllowRule, port: int) -> bool:
    return port in DEFAULT_PORTS if rule.port is None else port == rule.port


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if "%" in text:  # an IPv6 zone names an interface of this host: never a destination
        return None
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _unmapped(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An IPv4-mapped IPv6 address (``::ffff:127.0.0.1``) as the IPv4 address it reaches."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _local(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether ``ip`` reaches this host or its link rather than a machine of the network."""
    ip = _unmapped(ip)
    if ip.is_loopback or ip.is_unspecified or ip.is_link_local or ip.is_multicast:
        return True
    return isinstance(ip, ipaddress.IPv4Address) and (ip in _THIS_NETWORK or ip == _BROADCAST)


def _q(text: str) -> str:
    """``text`` quoted for a one-line message, cut short when long."""
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def _ascii_name(name: str) -> str:
    """An internationalised name in its ``xn--`` form (IDNA 2003, what Python's codec does),
    or ValueError; an ASCII name as it is."""
    if name.isascii():
        return name
    prefix = _WILDCARD if name.startswith(_WILDCARD) else ""
    try:
        return prefix + name[len(prefix) :].encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError(
            f"{_q(name)} is not a valid host name; write it in its xn-- form"
        ) from None
