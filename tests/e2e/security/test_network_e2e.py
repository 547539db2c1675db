"""A coder's network is its own, through the real `assay run`: a hostile `command` coder reaches
for every service on the host (PostgreSQL, MariaDB, Redis, the real dashboard of `assay serve`,
the Temporal server; by loopback address, by `/run` socket path, by abstract name, and through
its own proxy) and gets nowhere, while the one host the contract allows answers."""

from __future__ import annotations

import contextlib
import http.server
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.repo import ASSAY
from support.temporal import DevServer, ExternalServer
from support.visible import visible_folder

if TYPE_CHECKING:
    from conftest import World

# The probe prints one line per target; its markers are computed, so the script's own text in
# the log never matches.
PROBE = """python3 - "$@" <<'PY'
import os, socket, sys, urllib.request
hit, no = "REA" + "CHED", "ref" + "used"
def tcp(target):
    host, port = target.rsplit(":", 1)
    return socket.create_connection((host, int(port)), 2)
def unix(target):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2)
    s.connect("\\0" + target[1:] if target.startswith("@") else target)
    return s
for target in os.environ["TARGETS"].split():
    try:
        (unix if target.startswith(("/", "@")) else tcp)(target).close()
        print(hit, target)
    except OSError as exc:
        print(no, target, type(exc).__name__)
for url in os.environ["VIA_PROXY"].split():
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            print(hit, url, answer.status, answer.read(64).decode())
    except Exception as exc:
        print(no, url, str(exc)[:80])
PY"""


class Served(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = ("ALLOWED-" + "OK").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def dashboard(world: World) -> Iterator[int]:
    """The real `assay serve --web-only` of the repository, on a port of its own."""
    port = free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    environ.update(HOME=str(world.home), ASSAY_CONFIG_DIR=str(world.tmp / "config"))
    serving = subprocess.Popen(
        [str(ASSAY), "serve", "--web-only", "--web-port", str(port)],
        cwd=world.root,
        env=environ,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                assert serving.poll() is None, "assay serve ended before serving"
                assert time.monotonic() < deadline, "the dashboard never listened"
                time.sleep(0.1)
        yield port
    finally:
        serving.terminate()
        serving.wait(timeout=30)


@pytest.fixture
def host_services() -> Iterator[dict[str, object]]:
    """An allowed web server, a unix socket in a folder every process sees, an abstract
    socket: each bound on the host for the coder to reach for."""
    allowed = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Served)
    threading.Thread(target=allowed.serve_forever, daemon=True).start()
    folder = Path(tempfile.mkdtemp(prefix="assay-sockets-", dir=visible_folder()))
    path = folder / f"db-{uuid.uuid4().hex[:8]}.sock"
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(path))
    unix.listen(4)
    abstract_name = f"assay-e2e-{uuid.uuid4().hex[:8]}"
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind("\0" + abstract_name)
    abstract.listen(4)
    yield {
        "allowed": allowed.server_address[1],
        "unix": str(path),
        "abstract": "@" + abstract_name,
    }
    allowed.shutdown()
    allowed.server_close()
    unix.close()
    abstract.close()
    shutil.rmtree(folder, ignore_errors=True)


def test_a_coder_reaches_no_host_service_and_only_the_allowed_host(
    world: World,
    host_services: dict[str, object],
    temporal_server: DevServer | ExternalServer,
) -> None:
    world.commit({"a.txt": "a\n"})
    services = host_services
    with dashboard(world) as port:
        services["dashboard"] = port
        services["temporal"] = temporal_server.address
        probe_everything(world, services)


def probe_everything(world: World, services: dict[str, object]) -> None:
    targets = [
        "127.0.0.1:5432",  # PostgreSQL
        "127.0.0.1:3306",  # MariaDB
        "127.0.0.1:6379",  # Redis
        f"127.0.0.1:{services['dashboard']}",
        f"127.0.0.1:{services['allowed']}",  # allowed through the proxy, not around it
        str(services["temporal"]),
        "/run/postgresql/.s.PGSQL.5432",
        "/var/run/postgresql/.s.PGSQL.5432",
        "/run/mysqld/mysqld.sock",
        str(services["unix"]),
        str(services["abstract"]),
    ]
    via_proxy = [
        f"http://127.0.0.1:{services['allowed']}/",
        f"http://127.0.0.1:{services['dashboard']}/",
        "http://127.0.0.1:5432/",
        f"http://{services['temporal']}/",
        f"http://localhost:{services['allowed']}/",
        "http://169.254.169.254/latest/meta-data/",
    ]
    env_block = (
        "env:\n"
        f"  TARGETS: {' '.join(targets)!r}\n"
        f"  VIA_PROXY: {' '.join(via_proxy)!r}\n"
        f"network: {{mode: 'on', allow: ['127.0.0.1:{services['allowed']}']}}\n"
    )
    contract = world.contract(
        "probe.yaml", [*PROBE.splitlines(), "echo x > x.txt"], extra=env_block
    )
    done = world.run(contract)
    payload = world.payload(done)
    world.assert_coder_ran()
    text = "\n".join(p.read_text(errors="replace") for p in world.logs() if p.suffix == ".out")
    reached = [line for line in text.splitlines() if line.startswith("REACHED")]
    # Only the allowed host, and only through the proxy (directly too: its loopback tunnel).
    allowed = services["allowed"]
    assert all(f":{allowed}" in line for line in reached), reached
    assert any("ALLOWED-OK" in line for line in reached), text
    refused = [line for line in text.splitlines() if line.startswith("refused")]
    assert len(refused) == len(targets) - 1 + len(via_proxy) - 1, text
    assert payload["network"] == "on"
    assert "network proxy refused" in done.stderr, done.stderr[-3000:]
