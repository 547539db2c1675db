"""The forwarder in a real bwrap sandbox with a network of its own: the program inside reaches
an allowed host server through its HTTP proxy and through a loopback tunnel, gets a 403 for
one not allowed, reaches nothing of the host directly, and its exit code comes back."""

from __future__ import annotations

import http.server
import importlib.util
import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.adapters import netwrap
from assay.adapters.egress_proxy import EgressProxy
from assay.adapters.netwrap import DEFAULT_PORT, forward_argv, proxy_environment
from assay.adapters.sandbox import bwrap_available
from assay.core.egress import AllowRule

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")

CLIENT = r"""
import json, os, socket, sys, urllib.error, urllib.request
allowed, other, abstract = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

def get(url, proxy=True):
    handlers = [] if proxy else [urllib.request.ProxyHandler({})]
    try:
        with urllib.request.build_opener(*handlers).open(url, timeout=5) as answer:
            return [answer.status, answer.read().decode()]
    except urllib.error.HTTPError as exc:
        return [exc.code, exc.read().decode()]
    except OSError as exc:
        return ["error", type(getattr(exc, "reason", exc)).__name__]

unix = socket.socket(socket.AF_UNIX)
try:
    unix.connect("\0" + abstract)
    reached = "connected"
except OSError as exc:
    reached = type(exc).__name__
print(json.dumps({
    "proxied": get(f"http://127.0.0.1:{allowed}/via-proxy"),
    "tunnel": get(f"http://127.0.0.1:{allowed}/via-tunnel", proxy=False),
    "other": get(f"http://127.0.0.1:{other}/"),
    "other_direct": get(f"http://127.0.0.1:{other}/", proxy=False),
    "abstract": reached,
}))
sys.exit(7)
"""


class PathHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"host saw {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def folder() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="nf-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def servers() -> Iterator[tuple[int, int]]:
    """Two HTTP servers on the host's 127.0.0.1: (allowed, not allowed)."""
    started = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), PathHandler) for _ in range(2)]
    for server in started:
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield started[0].server_address[1], started[1].server_address[1]
    for server in started:
        server.shutdown()
        server.server_close()


def sandboxed(folder: Path, argv: list[str]) -> list[str]:
    return [
        "bwrap", "--die-with-parent", "--unshare-net", "--unshare-pid", "--ro-bind", "/", "/",
        "--proc", "/proc", "--dev", "/dev", "--bind", str(folder), str(folder), "--", *argv,
    ]  # fmt: skip


@needs_bwrap
def test_inside_a_network_of_its_own_only_the_allowlist_is_reachable(
    folder: Path, servers: tuple[int, int]
) -> None:
    allowed, other = servers
    abstract = f"assay-test-{folder.name}"
    host_only = socket.socket(socket.AF_UNIX)
    host_only.bind("\0" + abstract)  # a host service on an abstract socket
    host_only.listen()
    socket_path = folder / "proxy.sock"
    program = [sys.executable, "-c", CLIENT, str(allowed), str(other), abstract]
    argv = forward_argv(socket_path, DEFAULT_PORT, [("127.0.0.1", allowed)], program)
    env = {"PATH": "/usr/bin:/bin", **proxy_environment(DEFAULT_PORT)}
    with host_only, EgressProxy([AllowRule("127.0.0.1", allowed)], socket_path) as proxy:
        done = subprocess.run(
            sandboxed(folder, argv),
            env=env,
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
        )
        refused = proxy.refused
    assert done.returncode == 7, done.stderr
    seen = json.loads(done.stdout)
    assert seen["proxied"] == [200, "host saw /via-proxy"]
    assert seen["tunnel"] == [200, "host saw /via-tunnel"]
    assert seen["other"][0] == 403
    assert f"egress to 127.0.0.1:{other} is not allowed" in seen["other"][1]
    assert seen["other_direct"] == ["error", "ConnectionRefusedError"]
    assert seen["abstract"] == "ConnectionRefusedError"
    assert refused == [f"127.0.0.1:{other}"]


@needs_bwrap
def test_a_refused_tunnel_closes_the_connection(folder: Path, servers: tuple[int, int]) -> None:
    allowed, other = servers
    socket_path = folder / "proxy.sock"
    client = (
        "import socket, sys\n"
        "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5)\n"
        "s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n"
        "try:\n"
        "    sys.exit(3 if s.recv(100) == b'' else 4)\n"
        "except ConnectionResetError:\n"
        "    sys.exit(3)\n"
    )
    argv = forward_argv(
        socket_path,
        DEFAULT_PORT,
        [("127.0.0.1", other)],
        [sys.executable, "-c", client, str(other)],
    )
    with EgressProxy([AllowRule("127.0.0.1", allowed)], socket_path):
        done = subprocess.run(
            sandboxed(folder, argv),
            env={"PATH": "/usr/bin:/bin"},
            check=False,
            capture_output=True,
            timeout=30,
        )
    assert done.returncode == 3, done.stderr


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return int(probe.getsockname()[1])


def run_forwarder(config: str, *program: str) -> subprocess.CompletedProcess[str]:
    argv = forward_argv(Path("/tmp/none.sock"), 1, [], program)
    argv[4] = config
    return subprocess.run(argv, check=False, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize(
    "config",
    [
        "not json",
        "[]",
        '{"socket": "relative.sock", "port": 47901}',
        '{"socket": "/tmp/p.sock", "port": 0}',
        '{"socket": "/tmp/p.sock", "port": true}',
        '{"socket": "/tmp/p.sock", "port": 47901, "tunnels": [["10.0.0.1", 80]]}',
        '{"socket": "/tmp/p.sock", "port": 47901, "tunnels": [["127.0.0.1"]]}',
        '{"socket": "/tmp/p.sock", "port": 47901, "extra": 1}',
    ],
)
def test_a_bad_configuration_exits_125_with_a_message(config: str) -> None:
    done = run_forwarder(config, "true")
    assert done.returncode == 125
    assert done.stderr.startswith("assay netforward: bad configuration: ")
    assert "Traceback" not in done.stderr


def test_no_program_exits_125() -> None:
    done = subprocess.run(
        forward_argv(Path("/tmp/p.sock"), free_port(), [], [])[:5],
        check=False,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 125
    assert "usage" in done.stderr


def test_a_program_that_cannot_run_exits_like_a_shell(folder: Path) -> None:
    config = json.dumps({"socket": str(folder / "p.sock"), "port": free_port()})
    missing = run_forwarder(config, "no-such-program-anywhere")
    assert (missing.returncode, missing.stderr.strip()) == (
        127, "assay netforward: no-such-program-anywhere: command not found"
    )  # fmt: skip
    script = folder / "script"
    script.write_text("#!/bin/sh\n")
    denied = run_forwarder(config, str(script))
    assert denied.returncode == 126
    assert "cannot execute" in denied.stderr


def test_the_listener_is_up_before_the_program_and_gone_after_it() -> None:
    port = free_port()
    config = json.dumps({"socket": "/tmp/none.sock", "port": port})
    probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5).close()"
    done = run_forwarder(config, sys.executable, "-c", probe)
    assert done.returncode == 0, done.stderr  # connected at once: no race with the program
    deadline = time.monotonic() + 3
    while True:  # the server ends with the program: the port is free again
        try:
            with socket.create_server(("127.0.0.1", port)):
                break
        except OSError:
            assert time.monotonic() < deadline, "the forwarder outlived its program"
            time.sleep(0.02)


def test_the_program_starts_with_sigpipe_at_its_default() -> None:
    config = json.dumps({"socket": "/tmp/none.sock", "port": free_port()})
    done = run_forwarder(config, "grep", "^SigIgn:", "/proc/self/status")
    ignored = int(done.stdout.split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1)), done.stdout


def test_a_port_already_taken_exits_125() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        config = json.dumps({"socket": "/tmp/none.sock", "port": taken.getsockname()[1]})
        done = run_forwarder(config, "true")
    assert done.returncode == 125
    assert "cannot listen on 127.0.0.1:" in done.stderr


def test_the_way_to_the_program_imports_nothing_slow() -> None:
    """Every seat pays for the forwarder's start: `socket`, `json`, `threading` and the like
    (with `enum` and `re` behind them) cost tens of milliseconds in a busy sandbox."""
    argv = forward_argv(Path("/tmp/none.sock"), free_port(), [], ["true"])
    done = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], capture_output=True, text=True, check=True
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "relay" in imported
    slow = {"socket", "json", "re", "enum", "threading", "typing", "selectors", "contextlib"}
    assert not imported & slow


def test_forward_argv_runs_the_script_isolated_with_its_configuration() -> None:
    argv = forward_argv(Path("/s/p.sock"), 47901, [("127.0.0.1", 8123), ("::1", 9)], ["a", "b"])
    assert argv[:3] == [sys.executable, "-I", "-S"]
    assert argv[3].endswith("/assay/adapters/netforward.py")
    assert json.loads(argv[4]) == {
        "socket": "/s/p.sock", "port": 47901, "tunnels": [["127.0.0.1", 8123], ["::1", 9]]
    }  # fmt: skip
    assert argv[5:] == ["a", "b"]


def test_the_proxy_environment_points_every_client_at_the_forwarder() -> None:
    env = proxy_environment(47999)
    for key in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        assert env[key] == env[key.lower()] == "http://127.0.0.1:47999"
    assert env["NO_PROXY"] == env["no_proxy"] == ""


def test_the_relay_is_compiled_where_a_read_only_sandbox_can_read_it() -> None:
    """Inside the sandbox Python cannot write bytecode: the host leaves it beforehand, whether
    or not this Python was told not to write any."""
    source = Path(netwrap.FORWARDER).with_name("relay.py")
    cached = Path(importlib.util.cache_from_source(str(source)))
    cached.unlink(missing_ok=True)
    netwrap.compile_relay.cache_clear()
    forward_argv(Path("/x.sock"), DEFAULT_PORT, [], ["true"])
    assert cached.is_file() and cached.stat().st_mtime >= source.stat().st_mtime
