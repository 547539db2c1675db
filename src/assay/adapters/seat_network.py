"""The way out of a sandbox whose network is ``on``: a proxy of its own for each process.

The sandbox has a network namespace of its own (only ``lo``). Before the process starts, the
host starts an :class:`~assay.adapters.egress_proxy.EgressProxy` on a unix socket in a fresh
folder (bound read-only into the sandbox), letting through only the spec's ``allow`` rules.
Inside, :mod:`assay.adapters.netforward` listens on ``127.0.0.1:<port>`` before running the
program and carries each connection to that socket; the program is told so by the usual
proxy variables. An allowed loopback endpoint (a local model server named by its base URL) is
also listened on at its own address inside, tunnelled through the proxy, for clients that
never send loopback through a proxy.
"""

from __future__ import annotations

import ipaddress
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from assay.adapters.egress_proxy import EgressProxy
from assay.adapters.netwrap import DEFAULT_PORT, forward_argv, proxy_environment
from assay.adapters.sandbox_spec import SandboxSpec
from assay.core.egress import AllowRule
from assay.core.vocab import NetworkMode

SOCKET_NAME = "proxy.sock"
_NO_PROXY = ("NO_PROXY", "no_proxy")


@dataclass
class SeatNetwork:
    """What the process is started with: its spec (the proxy's folder bound in), the wrapper
    that runs it, its environment; and afterwards, what the proxy refused."""

    sandbox: SandboxSpec
    wrapper: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    proxy: EgressProxy | None = None

    @property
    def refused(self) -> list[str]:
        return list(self.proxy.refused) if self.proxy is not None else []


@contextmanager
def seat_network(sandbox: SandboxSpec, env: Mapping[str, str]) -> Iterator[SeatNetwork]:
    """The proxy for one sandboxed process while it runs; nothing for ``none`` or ``host``, nor
    for ``on`` with nothing allowed (the namespace alone lets nothing out: no proxy to pay)."""
    if sandbox.network is not NetworkMode.ON or not sandbox.allow:
        yield SeatNetwork(sandbox=sandbox, env=dict(env))
        return
    folder = Path(tempfile.mkdtemp(prefix="assay-net-"))
    socket_path = folder / SOCKET_NAME
    proxy = EgressProxy(sandbox.allow, socket_path)
    try:
        proxy.start()
        inner = {key: value for key, value in env.items() if key not in _NO_PROXY}
        inner.update(proxy_environment(DEFAULT_PORT))
        yield SeatNetwork(
            sandbox=replace(sandbox, readable=(*sandbox.readable, folder)),
            wrapper=forward_argv(socket_path, DEFAULT_PORT, loopback_tunnels(sandbox.allow), []),
            env=inner,
            proxy=proxy,
        )
    finally:
        proxy.stop()
        shutil.rmtree(folder, ignore_errors=True)


def loopback_tunnels(rules: Sequence[AllowRule]) -> list[tuple[str, int]]:
    """The allowed loopback endpoints (an IP literal or ``localhost`` with a port), each to be
    listened on at its own address inside the sandbox."""
    tunnels: dict[tuple[str, int], None] = {}
    for rule in rules:
        if rule.port is None or rule.port == DEFAULT_PORT:
            continue
        if rule.host == "localhost" or _is_loopback(rule.host):
            tunnels[(rule.host, rule.port)] = None
    return list(tunnels)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
