"""A sandbox's network is its own: with the real bwrap, nothing the host listens on, by address,
by path or by abstract name, is reachable from inside unless the network is ``host``."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.visible import visible_folder

from assay.adapters import seat_network as seat_network_module
from assay.adapters.process import EnvironmentFault, run_process
from assay.adapters.sandbox import bwrap_problem, host_sockets
from assay.adapters.sandbox_spec import SandboxSpec
from assay.core.egress import AllowRule
from assay.core.vocab import NetworkMode

PATH = os.environ.get("PATH", "/usr/bin:/bin")
PROBE = """
import socket, sys
for target in sys.argv[1:]:
    unix = target.startswith(("/", "@"))
    family = socket.AF_UNIX if unix else socket.AF_INET
    s = socket.socket(family)
    s.settimeout(2)
    address = target
    if family == socket.AF_INET:
        host, port = target.rsplit(":", 1)
        address = (host, int(port))
    elif target.startswith("@"):
        address = "\\0" + target[1:]
    try:
        s.connect(address)
        print("REACHED", target)
    except OSError as exc:
        print("refused", target, exc.__class__.__name__)
"""


@pytest.fixture(autouse=True)
def _bwrap_works() -> None:
    problem = bwrap_problem()
    assert problem is None, f"these tests need a working bubblewrap: {problem}"


class HostServices:
    """What a host might run: a TCP listener on loopback, a unix socket at a path in a folder
    every process can see, and an abstract unix socket."""

    def __init__(self, folder: Path) -> None:
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(4)
        self.path = folder / f"db-{uuid.uuid4().hex[:8]}.sock"
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(str(self.path))
        self.unix.listen(4)
        self.abstract_name = f"assay-test-{uuid.uuid4().hex[:8]}"
        self.abstract = socket.socket(socket.AF_UNIX)
        self.abstract.bind("\0" + self.abstract_name)
        self.abstract.listen(4)

    @property
    def targets(self) -> list[str]:
        port = self.tcp.getsockname()[1]
        return [f"127.0.0.1:{port}", str(self.path), f"@{self.abstract_name}"]

    def close(self) -> None:
        for s in (self.tcp, self.unix, self.abstract):
            s.close()
        self.path.unlink(missing_ok=True)


@pytest.fixture
def visible() -> Iterator[Path]:
    """A folder the sandbox shows (unlike /tmp and /var/tmp, which are private inside)."""
    folder = Path(tempfile.mkdtemp(prefix="assay-sockets-", dir=visible_folder()))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def services(visible: Path) -> Iterator[HostServices]:
    started = HostServices(visible)
    yield started
    started.close()


def probe(tmp_path: Path, spec: SandboxSpec, targets: list[str]) -> str:
    seat = tmp_path / "seat"
    seat.mkdir(exist_ok=True)
    ran = run_process(
        [sys.executable, "-c", PROBE, *targets],
        cwd=seat,
        env={"PATH": PATH},
        timeout=30,
        log_path=tmp_path / "logs" / f"probe-{uuid.uuid4().hex[:6]}.log",
        sandbox=spec,
    )
    assert ran.exit_code == 0, ran.stderr
    return ran.stdout


@pytest.mark.parametrize("network", [NetworkMode.ON, NetworkMode.NONE])
def test_nothing_of_the_host_is_reachable(
    tmp_path: Path, services: HostServices, network: NetworkMode
) -> None:
    spec = SandboxSpec(writable=(tmp_path / "seat",), network=network)
    out = probe(tmp_path, spec, [*services.targets, "/run/postgresql/.s.PGSQL.5432"])
    assert "REACHED" not in out, out
    assert out.count("refused") == 4


def test_network_host_is_the_machines_own(tmp_path: Path, services: HostServices) -> None:
    spec = SandboxSpec(writable=(tmp_path / "seat",), network=NetworkMode.HOST)
    out = probe(tmp_path, spec, services.targets)
    assert out.count("REACHED") == 3, out


def test_a_socket_in_a_folder_granted_by_name_stays_reachable(
    tmp_path: Path, services: HostServices
) -> None:
    granted = SandboxSpec(writable=(tmp_path / "seat",), readable=(services.path.parent,))
    assert "REACHED" in probe(tmp_path, granted, [str(services.path)])


def test_host_sockets_lists_bound_paths_only(services: HostServices) -> None:
    found = host_sockets()
    assert services.path.resolve() in found
    assert all(p.is_absolute() for p in found)


def listen_unix(path: Path, *, relative: bool = False) -> socket.socket:
    """A unix socket listening at ``path``; bound by its bare name from its folder when
    ``relative`` (the host's table then shows the name only)."""
    sock = socket.socket(socket.AF_UNIX)
    if relative:
        before = os.getcwd()
        os.chdir(path.parent)
        try:
            sock.bind(path.name)
        finally:
            os.chdir(before)
    else:
        sock.bind(str(path))
    sock.listen(4)
    return sock


def test_a_socket_bound_by_a_relative_name_is_hidden_too(tmp_path: Path, visible: Path) -> None:
    """The table shows a relative name only: the folder its server runs in is where it is."""
    path = visible / "relative.sock"
    before = os.getcwd()
    os.chdir(visible)  # a server that binds by name where it runs
    try:
        with listen_unix(path, relative=True):
            assert path.resolve() in host_sockets()
            out = probe(tmp_path, SandboxSpec(writable=(tmp_path / "seat",)), [str(path)])
    finally:
        os.chdir(before)
    assert "REACHED" not in out and "refused" in out, out


def test_var_tmp_is_private_so_a_socket_made_there_after_the_start_is_unreachable(
    tmp_path: Path,
) -> None:
    """Any user of the host can make a socket in /var/tmp at any time, after the sandbox read
    the host's table too: inside, /var/tmp is a fresh tmpfs."""
    path = Path("/var/tmp") / f"late-{uuid.uuid4().hex[:8]}.sock"
    made: list[socket.socket] = []

    def late() -> None:
        time.sleep(0.5)
        made.append(listen_unix(path))

    maker = threading.Thread(target=late)
    maker.start()
    try:
        spec = SandboxSpec(writable=(tmp_path / "seat",))
        seat = tmp_path / "seat"
        seat.mkdir()
        ran = run_process(
            [sys.executable, "-c", f"import time; time.sleep(1.5); exec({PROBE!r})", str(path)],
            cwd=seat,
            env={"PATH": PATH},
            timeout=30,
            log_path=tmp_path / "late.log",
            sandbox=spec,
        )
    finally:
        maker.join()
        for sock in made:
            sock.close()
        path.unlink(missing_ok=True)
    assert made, "the late socket was never made"
    assert "REACHED" not in ran.stdout and "refused" in ran.stdout, ran.stdout + ran.stderr


def test_a_proxy_that_cannot_start_is_the_machines_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk is full when the seat's proxy needs its folder: an environment fault (the run
    is refunded, the reason named), never a program that "could not start"."""

    def full(*args: object, **kwargs: object) -> str:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(seat_network_module.tempfile, "mkdtemp", full)
    spec = SandboxSpec(writable=(tmp_path / "seat",), allow=(AllowRule("example.com"),))
    with pytest.raises(EnvironmentFault, match=r"network proxy could not start.*No space"):
        probe(tmp_path, spec, ["127.0.0.1:1"])
