"""``assay dev-server``: the real Temporal dev server binary, started, announced and stopped.
Where it looks for the binary and keeps its state, and what it refuses before starting one, is
tests/unit/cli/test_dev_server_settings.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from support.temporal import free_port, pid_alive, require_binary


def start(home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "assay.cli.main", "dev-server", *args],
        env={**os.environ, "ASSAY_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def announced(proc: subprocess.Popen[str]) -> dict[str, object]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, proc.communicate(timeout=30)
    doc = json.loads(line)
    assert isinstance(doc, dict)
    return doc


def stop(proc: subprocess.Popen[str], sig: signal.Signals) -> tuple[int, str]:
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    return proc.returncode, err


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def wait_gone(pid: int, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_listens_stops_on_sigterm_and_restarts_on_its_state(tmp_path: Path):
    require_binary()
    home, port = tmp_path / "home", free_port()
    proc = start(home, "--port", str(port), "--json")
    doc = announced(proc)
    state = home / "temporal" / "dev.db"
    assert doc["address"] == f"127.0.0.1:{port}" and doc["port"] == port
    assert doc["ui"] is None and doc["state"] == str(state)
    assert accepts(port) and state.is_file()
    server_pid = doc["pid"]
    assert isinstance(server_pid, int) and pid_alive(server_pid)

    # A second server on the same state is refused; so is a port already taken.
    again = start(home, "--port", str(free_port()))
    _, err = again.communicate(timeout=60)
    assert again.returncode == 2 and "another dev server uses the state" in err, err
    taken = start(tmp_path / "other", "--port", str(port))
    _, err = taken.communicate(timeout=60)
    assert taken.returncode == 2 and f"port {port} on 127.0.0.1 is in use" in err, err

    code, err = stop(proc, signal.SIGTERM)
    assert code == 143, err
    assert "SIGTERM: stopping the dev server" in err
    assert wait_gone(server_pid) and not accepts(port)

    # Restarted on the same state, in text form, stopped by SIGINT.
    proc = start(home, "--port", str(port))
    assert proc.stdout is not None
    assert proc.stdout.readline() == f"temporal dev server listening on 127.0.0.1:{port}\n"
    assert proc.stdout.readline().startswith(f"state {state}; log ")
    code, err = stop(proc, signal.SIGINT)
    assert code == 130, err


def test_a_killed_command_takes_the_server_with_it(tmp_path: Path):
    require_binary()
    proc = start(tmp_path / "home", "--port", str(free_port()), "--json")
    server_pid = announced(proc)["pid"]
    assert isinstance(server_pid, int)
    proc.kill()
    proc.wait(timeout=10)
    assert wait_gone(server_pid), "the dev server outlived a kill -9 of assay dev-server"


def test_a_server_that_dies_says_so_with_its_log(tmp_path: Path):
    require_binary()
    home, port = tmp_path / "home", free_port()
    proc = start(home, "--port", str(port), "--json")
    server_pid = announced(proc)["pid"]
    assert isinstance(server_pid, int)
    os.kill(server_pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, err
    assert "the dev server exited (signal 9)" in err
    assert str(home / "temporal" / "dev.log") in err


def registered(port: int) -> dict[str, str]:
    """The custom search attributes of the server's default namespace, by name."""
    listed = subprocess.run(
        [str(require_binary()), "operator", "search-attribute", "list",
         "--address", f"127.0.0.1:{port}", "-o", "json"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    custom: dict[str, str] = json.loads(listed.stdout).get("customAttributes", {})
    return custom


def test_it_registers_the_runs_search_attributes_in_a_state_made_before_them(tmp_path: Path):
    """The server's own flags only reach a new state: a dev.db an earlier assay made gets them
    when assay dev-server starts on it again."""
    binary = require_binary()
    home, port = tmp_path / "home", free_port()
    state = home / "temporal" / "dev.db"
    state.parent.mkdir(parents=True)
    older = subprocess.Popen(
        [str(binary), "server", "start-dev", "--headless", "--port", str(port),
         "--db-filename", str(state), "--log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not accepts(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert registered(port) == {}
    finally:
        older.terminate()
        older.wait(30)
    proc = start(home, "--port", str(port), "--json")
    announced(proc)
    keyword = "INDEXED_VALUE_TYPE_KEYWORD"
    expected = {"AssayTaskId": keyword, "AssayRepository": keyword, "AssayStatus": keyword}
    assert registered(port) == expected
    code, err = stop(proc, signal.SIGTERM)
    assert code == 143 and "WARNING" not in err, err
