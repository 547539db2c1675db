"""Fixtures for the SQL ledger: every test runs on SQLite, and on PostgreSQL when
``ASSAY_TEST_POSTGRES_URL`` is set (each test in a fresh schema, dropped afterwards)."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from assay.adapters.store.sql import Ledger

# The suite imports test modules in importlib mode, so the shared driver module beside this
# file is put on the path explicitly.
sys.path.insert(0, str(Path(__file__).parent))

from ledger_driver import Driver, LedgerTarget

POSTGRES_ENV = "ASSAY_TEST_POSTGRES_URL"


@pytest.fixture(scope="session")
def postgres_prefix() -> Iterator[str | None]:
    """A random schema prefix for this session; leftovers with it are dropped at the end."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        yield None
        return
    prefix = f"assay_test_{secrets.token_hex(4)}"
    yield prefix
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        names = conn.execute(
            sa.text("SELECT nspname FROM pg_namespace WHERE nspname LIKE :p"),
            {"p": f"{prefix}%"},
        ).scalars()
        for name in list(names):
            conn.execute(sa.text(f'DROP SCHEMA "{name}" CASCADE'))
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def target(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_prefix: str | None
) -> Iterator[LedgerTarget]:
    if request.param == "sqlite":
        made = LedgerTarget("sqlite", f"sqlite:///{tmp_path / 'assay.db'}")
        yield made
        for ledger in made.opened:
            ledger.close()
        return
    url = os.environ.get(POSTGRES_ENV)
    if not url or postgres_prefix is None:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    schema = f"{postgres_prefix}_{secrets.token_hex(4)}"
    admin = sa.create_engine(url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    made = LedgerTarget("postgresql", url, schema)
    try:
        yield made
    finally:
        for ledger in made.opened:
            ledger.close()
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def ledger(target: LedgerTarget) -> Ledger:
    """A migrated, empty ledger."""
    return target.open()


@pytest.fixture
def driver(ledger: Ledger) -> Driver:
    return Driver(ledger)
