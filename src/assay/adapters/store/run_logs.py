"""A run's logs in the ledger: written as they are shipped (each ship replaces what an
earlier one wrote of the same file), read back by name.

What is kept of a file (bounded, redacted) is decided before it gets here
(:mod:`assay.core.run_logs`, :mod:`assay.adapters.log_shipping`); this module only stores it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict

from assay.adapters.store import statements as st
from assay.adapters.store.schema import run_logs
from assay.core.run_logs import KeptLog
from assay.core.vocab import LogRole

__all__ = ["LogEntry", "read_log", "read_logs", "write_logs"]

_LISTED = (
    run_logs.c.name,
    run_logs.c.role,
    run_logs.c.attempt,
    run_logs.c.seat,
    run_logs.c.size,
    run_logs.c.truncated,
    run_logs.c.updated_at,
)


class LogEntry(BaseModel):
    """One log the ledger keeps of a run; ``text`` is None in a listing."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str
    role: LogRole
    attempt: int | None = None
    seat: int | None = None
    size: int
    truncated: bool
    updated_at: datetime
    text: str | None = None


def write_logs(conn: sa.Connection, run_id: str, logs: Sequence[KeptLog], at: datetime) -> None:
    """Insert or replace each of ``logs`` (by run and name). A program's ``X.log`` holds its
    raw streams (``X.log.out``, ``X.log.err``, shipped while it ran, provisional): written, it
    replaces them, in the same transaction."""
    if not logs:
        return
    written = {log.name for log in logs}
    replaced = [
        f"{log.name}{stream}"
        for log in logs
        if log.name.endswith(".log")
        for stream in (".out", ".err")
        if f"{log.name}{stream}" not in written
    ]
    if replaced:
        conn.execute(
            sa.delete(run_logs).where(run_logs.c.run_id == run_id, run_logs.c.name.in_(replaced))
        )
    rows = [
        {
            "run_id": run_id,
            "name": log.name,
            "attempt": log.attempt,
            "seat": log.seat,
            "role": log.role.value,
            "size": log.size,
            "text": log.text,
            "truncated": log.truncated,
            "updated_at": at,
        }
        for log in logs
    ]
    conn.execute(_upsert(conn.dialect.name), rows)


def read_logs(conn: sa.Connection, run_id: str) -> list[LogEntry]:
    """The run's logs without their text, in the order of their names."""
    query = sa.select(*_LISTED).where(run_logs.c.run_id == run_id).order_by(run_logs.c.name)
    return [LogEntry.model_validate(row._asdict()) for row in conn.execute(query)]


def read_log(conn: sa.Connection, run_id: str, name: str) -> LogEntry | None:
    query = sa.select(*_LISTED, run_logs.c.text).where(
        run_logs.c.run_id == run_id, run_logs.c.name == name
    )
    row = conn.execute(query).first()
    return None if row is None else LogEntry.model_validate(row._asdict())


@cache
def _upsert(dialect: str) -> Any:
    stmt = st.upsert(dialect)(run_logs)
    replaced = ("attempt", "seat", "role", "size", "text", "truncated", "updated_at")
    return stmt.on_conflict_do_update(
        index_elements=["run_id", "name"], set_={c: stmt.excluded[c] for c in replaced}
    )
