"""The allowlist's rules: what the parser accepts, what each rule lets through, and which
resolved addresses the proxy may connect to."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.core.egress import (
    AllowRule,
    address_allowed,
    allowed_by,
    parse_rule,
    rule_for_url,
    shown,
    target,
)

LABEL = st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True)
NAMES = st.lists(LABEL, min_size=2, max_size=4).map(".".join)
PORTS = st.integers(1, 65535)
IPV4 = st.ip_addresses(v=4).map(str)
IPV6 = st.ip_addresses(v=6).map(str)
NO_PORT = {(None, 443), (None, 80)}
PATHS = st.text("/ab?#").map(lambda text: "/" + text if text else "")


def _mixed_case(name: str, flips: list[bool]) -> str:
    return "".join(
        c.upper() if flip else c for c, flip in zip(name, flips + [False] * len(name), strict=False)
    )


@given(NAMES, st.none() | PORTS, st.lists(st.booleans(), max_size=60))
def test_a_host_and_port_parse_to_their_lower_case_rule(
    name: str, port: int | None, flips: list[bool]
) -> None:
    written = _mixed_case(name, flips) + ("" if port is None else f":{port}")
    rule = parse_rule(written)
    assert rule == AllowRule(name, port)
    assert rule.host == name
    assert parse_rule(shown(rule)) == rule


@given(st.text(max_size=40))
def test_any_text_parses_or_raises_a_one_line_value_error(text: str) -> None:
    try:
        rule = parse_rule(text)
    except ValueError as exc:
        assert "\n" not in str(exc)
        assert str(exc)
    else:
        assert parse_rule(shown(rule)) == rule


@given(NAMES, LABEL, st.none() | PORTS)
def test_a_wildcard_allows_subdomains_only(domain: str, sub: str, port: int | None) -> None:
    rule = parse_rule(f"*.{domain}" + ("" if port is None else f":{port}"))
    wanted = 443 if port is None else port
    assert allowed_by([rule], f"{sub}.{domain}", wanted) == rule
    assert allowed_by([rule], f"{sub}.{sub}.{domain}", wanted) == rule
    assert allowed_by([rule], domain, wanted) is None
    assert allowed_by([rule], f"{sub}{domain}", wanted) is None  # "evilexample.com"
    suffixed = f"{domain}.{sub}"  # "example.com.evil": a subdomain only if it ends in .domain
    assert (allowed_by([rule], suffixed, wanted) is None) == (not suffixed.endswith(f".{domain}"))


@given(NAMES, st.lists(st.booleans(), max_size=60), PORTS)
def test_matching_ignores_case_and_a_trailing_dot(name: str, flips: list[bool], port: int) -> None:
    rule = AllowRule(name, port)
    assert allowed_by([rule], _mixed_case(name, flips) + ".", port) == rule
    assert allowed_by([rule], name, port % 65535 + 1) is None


@given(NAMES, PORTS)
def test_a_rule_without_a_port_allows_https_and_http_only(name: str, port: int) -> None:
    rule = parse_rule(name)
    assert (allowed_by([rule], name, port) is not None) == (port in (443, 80))


@given(IPV6, PORTS)
def test_an_ipv6_rule_matches_every_spelling_of_its_address(address: str, port: int) -> None:
    rule = parse_rule(f"[{ipaddress.IPv6Address(address).exploded.upper()}]:{port}")
    assert rule.host == ipaddress.IPv6Address(address).compressed
    assert allowed_by([rule], address, port) == rule
    assert allowed_by([rule], f"[{address}]", port) == rule
    assert allowed_by([rule], ipaddress.IPv6Address(address).exploded, port) == rule
    assert shown(rule) == target(rule.host, port)
    assert parse_rule(shown(rule)) == rule


@given(st.lists(st.tuples(NAMES, st.none() | PORTS), min_size=1, max_size=5), NAMES, PORTS)
def test_the_first_allowing_rule_is_the_answer(
    written: list[tuple[str, int | None]], host: str, port: int
) -> None:
    rules = [AllowRule(name, p) for name, p in written] + [AllowRule(host, port)]
    found = allowed_by(rules, host, port)
    assert found is not None
    assert found == next(
        r for r in rules if r.host == host and (r.port == port or (r.port, port) in NO_PORT)
    )


@given(NAMES, st.sampled_from(["http", "https", "HTTPS"]), st.none() | PORTS, PATHS)
def test_a_url_allows_exactly_its_port(name: str, scheme: str, port: int | None, path: str) -> None:
    url = f"{scheme}://{name}" + ("" if port is None else f":{port}") + path
    default = 443 if scheme.lower() == "https" else 80
    expected = AllowRule(name, default if port is None else port)
    assert rule_for_url(url) == expected
    assert parse_rule(url) == expected


@given(IPV4 | IPV6, NAMES)
def test_a_named_rule_never_reaches_this_host(address: str, name: str) -> None:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    local = ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast
    if local:
        assert not address_allowed(AllowRule(name), address)
        assert address_allowed(AllowRule(address), address)  # the rule names it: allowed
    elif not (
        isinstance(ip, ipaddress.IPv4Address) and (ip.packed[0] == 0 or ip.packed == b"\xff" * 4)
    ):
        assert address_allowed(AllowRule(name), address)


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1", "0.0.0.0", "0.1.2.3", "::",
     "169.254.169.254", "fe80::1", "224.0.0.1", "ff02::1", "255.255.255.255"],
)  # fmt: skip
def test_an_address_on_this_host_or_its_link_is_refused_for_a_name(address: str) -> None:
    assert not address_allowed(AllowRule("api.example.com"), address)
    assert not address_allowed(AllowRule("*.example.com"), address)


def test_localhost_and_an_ip_literal_reach_loopback_and_only_it() -> None:
    assert address_allowed(AllowRule("localhost", 8123), "127.0.0.1")
    assert address_allowed(AllowRule("localhost", 8123), "::1")
    assert not address_allowed(AllowRule("localhost", 8123), "169.254.169.254")
    assert address_allowed(AllowRule("127.0.0.1", 8123), "127.0.0.1")
    assert address_allowed(AllowRule("127.0.0.1", 8123), "::ffff:127.0.0.1")
    assert not address_allowed(AllowRule("127.0.0.1", 8123), "127.0.0.2")
    assert not address_allowed(AllowRule("127.0.0.1", 8123), "not an address")
    assert address_allowed(AllowRule("api.example.com"), "10.1.2.3")  # a network's, not ours


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("api.example.com ", "whitespace"),
        ("a b", "whitespace"),
        ("host:0", "port"),
        ("host:65536", "port"),
        ("host:http", "port"),
        ("host:", "port"),
        ("*", "every host"),
        ("*.com", "top-level"),
        ("*.*.example.com", "wildcard"),
        ("user@host", "host"),
        ("https://user:pw@host", "user name"),
        ("ftp://host", "http"),
        ("https://", "no host"),
        ("https://*.example.com", "one host"),
        ("https://::1/", "brackets"),
        ("[1.2.3.4]:80", "IPv6"),
        ("[::1", "bracket"),
        ("host:80/path", "host"),
        ("-bad.example.com", "valid host"),
        ("127.1", "valid host"),
        ("fe80::1%eth0", "valid host"),
        ("x" * 300, "valid host"),
    ],
)
def test_what_is_no_rule_says_why_in_one_line(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why) as raised:
        parse_rule(text)
    assert "\n" not in str(raised.value)
    assert len(str(raised.value)) < 250


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("[::1]:8080", AllowRule("::1", 8080)),
        ("::1", AllowRule("::1", None)),
        ("http://127.0.0.1:8123/v1", AllowRule("127.0.0.1", 8123)),
        ("HTTPS://[::1]/x", AllowRule("::1", 443)),
        ("localhost.", AllowRule("localhost", None)),
        ("bücher.example", AllowRule("xn--bcher-kva.example", None)),
        ("*.Example.COM:8443", AllowRule("*.example.com", 8443)),
    ],
)
def test_each_spelling_the_contract_may_use(text: str, rule: AllowRule) -> None:
    assert parse_rule(text) == rule


@pytest.mark.parametrize("url", ["ftp://host", "https://", "no scheme", "http://h:99999", ""])
def test_rule_for_url_is_none_for_what_is_no_http_url(url: str) -> None:
    assert rule_for_url(url) is None


@pytest.mark.parametrize(
    "host", ["", "evil.com\x00.example.com", "a/b.example.com", "x..example.com"]
)
def test_a_malformed_host_is_allowed_by_no_rule(host: str) -> None:
    assert allowed_by([AllowRule("*.example.com")], host, 443) is None


def test_a_rule_built_directly_is_normalised_and_checked() -> None:
    assert AllowRule("API.Example.com.", 443).host == "api.example.com"
    assert AllowRule("[0:0::1]").host == "::1"
    with pytest.raises(ValueError, match="port"):
        AllowRule("api.example.com", 0)
    with pytest.raises(ValueError, match="valid host"):
        AllowRule("not a host")
