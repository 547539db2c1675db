"""A private PostgreSQL schema for one benchmark, dropped when it ends, shared by the benches
that measure the ledger on PostgreSQL."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa


@contextmanager
def bench_schema(url: str) -> Iterator[str]:
    """A fresh schema's name in the database at ``url``; it and all in it go afterwards."""
    schema = f"assay_bench_{secrets.token_hex(4)}"
    admin = sa.create_engine(url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield schema
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
