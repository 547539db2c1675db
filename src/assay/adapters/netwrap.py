"""How a seat's program is started behind its egress proxy: the command that runs
:mod:`assay.adapters.netforward` in front of it, and the environment that points its HTTP
clients at the forwarder's loopback port."""

from __future__ import annotations

import functools
import importlib.util
import json
import py_compile
import sys
from collections.abc import Sequence
from pathlib import Path

from assay.adapters import netforward
from assay.adapters.netforward import DEFAULT_PORT

__all__ = ["DEFAULT_PORT", "FORWARDER", "forward_argv", "proxy_environment"]

FORWARDER = Path(netforward.__file__).resolve()
"""The forwarder's script (and :mod:`assay.adapters.relay` beside it, which it loads); the
sandbox must show them: they lie in the assay package, which a sandbox binds read-only."""

_PROXY_KEYS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
_NO_PROXY_KEYS = ("NO_PROXY", "no_proxy")


@functools.cache
def compile_relay() -> None:
    """Leave :mod:`assay.adapters.relay`'s bytecode in its ``__pycache__`` (once per process):
    the forwarder imports it inside a read-only sandbox, where Python cannot write the cache
    and would compile the module again on every seat's start (20 ms on a busy machine). Python
    reads the cache even where it was told not to write one (``PYTHONDONTWRITEBYTECODE``)."""
    source = FORWARDER.with_name("relay.py")
    cached = Path(importlib.util.cache_from_source(str(source)))
    try:
        if cached.exists() and cached.stat().st_mtime >= source.stat().st_mtime:
            return
        py_compile.compile(str(source), cfile=str(cached), doraise=True)
    except (OSError, py_compile.PyCompileError):
        return  # an installation assay cannot write: the forwarder compiles it, slower


def forward_argv(
    socket_path: Path, port: int, tunnels: Sequence[tuple[str, int]], argv: Sequence[str]
) -> list[str]:
    """``argv`` started behind the forwarder: it listens on ``127.0.0.1:port`` (and the
    ``tunnels``, loopback addresses or ``localhost``), carries every connection to the proxy at
    ``socket_path``, then ``exec``s ``argv`` (exit codes: the program's; 125 for a bad
    configuration; 126/127 when the program cannot be run). Runs with this interpreter,
    isolated (``-I -S``: no site, no ``PYTHON*`` variable, no user packages)."""
    config = {
        "socket": str(socket_path),
        "port": port,
        "tunnels": [[host, tunnel_port] for host, tunnel_port in tunnels],
    }
    compile_relay()
    spec = json.dumps(config, separators=(",", ":"))
    return [sys.executable, "-I", "-S", str(FORWARDER), spec, *argv]


def proxy_environment(port: int) -> dict[str, str]:
    """The variables that send a seat's HTTP clients through the forwarder: ``HTTPS_PROXY``,
    ``HTTP_PROXY`` and ``ALL_PROXY`` in both cases, ``http://127.0.0.1:port``; ``NO_PROXY`` and
    ``no_proxy`` empty, so nothing bypasses it.

    The caller removes any ``NO_PROXY``/``no_proxy`` the operator's environment carries before
    it lays these over it (or lets these empty values replace them): a host named there would
    go direct, and fail, since the seat's network has nothing but its loopback."""
    url = f"http://127.0.0.1:{port}"
    env = {key: url for name in _PROXY_KEYS for key in (name, name.lower())}
    env.update(dict.fromkeys(_NO_PROXY_KEYS, ""))
    return env
