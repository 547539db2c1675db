"""Many rows, and many tables' rows, written by statements whose text does not grow with them.

A run's close writes rows into five tables; how many rows varies from close to close, so a
statement whose text grew with them would be parsed (by the driver and the server) and
planned anew each time. Each dialect has its own way to keep the text fixed:

- SQLite (:func:`insert`): one ``executemany`` per table, run on the driver with the columns'
  own bind processors (:mod:`driver`): a statement there is no round trip, and what costs is
  SQLAlchemy's work around each one.
- PostgreSQL (:func:`recordset_insert`): each table's rows are one ``jsonb`` parameter
  expanded by ``jsonb_populate_recordset`` (typed by the table's own row type), so every
  table fits in one statement (see :mod:`close_sql`) whose text depends only on the
  tables and columns: psycopg converts it once and the server prepares it once. The rows are
  inserted in the array's order, so ids are drawn in that order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from assay.adapters.store import driver
from assay.adapters.store.driver import DriverStatement
from assay.adapters.store.schema import UTCDateTime

Shape = tuple[sa.Table, tuple[str, ...], str]
"""A statement's table, columns and tail; the key its text is cached under."""


@dataclass(frozen=True)
class Rows:
    """Rows for one table, all with the same keys, and an optional ``ON CONFLICT`` tail."""

    table: sa.Table
    rows: Sequence[Mapping[str, Any]]
    tail: str = ""

    def shape(self) -> Shape:
        return (self.table, tuple(self.rows[0]), self.tail)


def insert(conn: sa.Connection, parts: Sequence[Rows]) -> None:
    """SQLite: insert every part's rows, in the order given, each part's ids drawn in row
    order; one ``executemany`` on the driver per part that has rows (see :mod:`driver`)."""
    for part in parts:
        if part.rows:
            driver.execute_many(conn, _many(part.shape(), conn.dialect), part.rows)


@lru_cache(maxsize=64)
def _many(shape: Shape, dialect: Dialect) -> DriverStatement:
    """The insert of one row of ``shape``, ``?`` placeholders typed by its columns."""
    table, columns, tail = shape
    sql = (
        f"INSERT INTO {table.name} ({', '.join(columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)}){tail}"
    )
    return DriverStatement.build(sql, dialect, [table.c[c] for c in columns])


def recordset(dialect: Dialect, part: Rows) -> str:
    """PostgreSQL: the part's rows as one JSON array of objects, times as ISO text in UTC
    (through the column type's own check, which refuses a naive time)."""
    times = _time_columns(part.table)
    rows = part.rows
    if times:
        rows = [
            {k: _utc_text(v, dialect) if k in times else v for k, v in row.items()} for row in rows
        ]
    return json.dumps(rows)


@lru_cache(maxsize=16)
def _time_columns(table: sa.Table) -> frozenset[str]:
    return frozenset(c.name for c in table.c if isinstance(c.type, UTCDateTime))


def _utc_text(value: datetime | None, dialect: Dialect) -> str | None:
    utc = UTCDateTime().process_bind_param(value, dialect)
    return None if utc is None else utc.isoformat()


def recordset_insert(shape: Shape, parameter: str, *, gate: str) -> str:
    """``INSERT INTO table (columns) SELECT columns FROM jsonb_populate_recordset(…)`` of the
    JSON array bound to ``parameter``, in the array's order, only if ``gate`` holds; then the
    tail."""
    table, columns, tail = shape
    listed = ", ".join(columns)
    return (
        f"INSERT INTO {table.name} ({listed}) SELECT {listed} FROM jsonb_populate_recordset("
        f"NULL::{table.name}, CAST(:{parameter} AS jsonb)) WITH ORDINALITY AS given"
        f" WHERE {gate} ORDER BY ordinality{tail}"
    )
