"""A fresh PostgreSQL database per test, its URL exported as ``ASSAY_DATABASE_URL``.

The server is ``$ASSAY_TEST_POSTGRES_URL`` (``.ci/run`` sets it), else the machine's own at
127.0.0.1:5432. Each test gets ``assay_<random>``, created for it and dropped after it (only
that one: never another test's or another user's). An unreachable server skips locally and
fails in CI.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from support.services import service_missing

SERVER_ENV = "ASSAY_TEST_POSTGRES_URL"
DEFAULT_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DATABASE_URL_ENV = "ASSAY_DATABASE_URL"


def server_url() -> str:
    return os.environ.get(SERVER_ENV) or DEFAULT_SERVER


def _admin() -> sa.Engine:
    # AUTOCOMMIT: CREATE / DROP DATABASE cannot run inside a transaction.
    return sa.create_engine(server_url(), isolation_level="AUTOCOMMIT", pool_pre_ping=True)


def create_database() -> str:
    """A new empty database; its SQLAlchemy URL (psycopg driver)."""
    name = f"assay_{secrets.token_hex(6)}"
    admin = _admin()
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except sa.exc.OperationalError as exc:
        admin.dispose()
        detail = " ".join(str(exc.orig or exc).split())[:300]
        service_missing(
            f"PostgreSQL at {make_url(server_url()).render_as_string()} is unreachable: {detail}"
        )
    admin.dispose()
    return make_url(server_url()).set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    name = make_url(url).database
    assert name and name.startswith("assay_"), name  # only one of ours
    admin = _admin()
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def postgres_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh database for this test, exported as ``ASSAY_DATABASE_URL`` (child processes
    inherit it)."""
    url = create_database()
    monkeypatch.setenv(DATABASE_URL_ENV, url)
    try:
        yield url
    finally:
        drop_database(url)
