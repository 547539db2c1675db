"""Many rows, and many tables' rows, written with one statement per table or one in all.

A run's close writes rows into five tables; how many rows varies from close to close, so a
statement whose text grew with them would be parsed (by the driver and the server) and
planned anew each time. Each dialect has its own way to keep the text fixed:

- SQLite: one ``executemany`` per table, its values passed through the columns' own bind
  processors (the same functions SQLAlchemy would apply, so what is stored is the same). A
  statement there is no round trip; what costs is SQLAlchemy's per-parameter work, which
  this skips.
- PostgreSQL: one statement for every table, each table's rows one ``jsonb`` parameter
  expanded by ``jsonb_populate_recordset`` (typed by the table's own row type): the first
  tables as data-modifying ``WITH`` parts, the last as the main insert. One round trip, and
  a text that depends only on the tables and columns, so psycopg converts it once and the
  server prepares it once. Each part runs exactly once and to completion; the order of the
  parts is the server's to choose, but foreign keys are checked at the end of the statement
  (a dispatch may reference an attempt inserted beside it), and the main insert draws its
  ids in the order of its rows (the events' order is kept: they come last).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from assay.adapters.store.schema import UTCDateTime

Shape = tuple[sa.Table, tuple[str, ...], str]
"""A statement's table, columns and tail; the key its text is cached under."""
Convert = Callable[[Any], Any] | None


@dataclass(frozen=True)
class Rows:
    """Rows for one table, all with the same keys, and an optional ``ON CONFLICT`` tail."""

    table: sa.Table
    rows: Sequence[Mapping[str, Any]]
    tail: str = ""

    def shape(self) -> Shape:
        return (self.table, tuple(self.rows[0]), self.tail)


def insert(conn: sa.Connection, parts: Sequence[Rows]) -> None:
    """Insert every part's rows, in the order given, each part's ids drawn in row order."""
    parts = [p for p in parts if p.rows]
    if not parts:
        return
    if conn.dialect.name == "postgresql":
        shapes = tuple(p.shape() for p in parts)
        values = {f"w{k}": _recordset(conn.dialect, p) for k, p in enumerate(parts)}
        conn.execute(_combined(shapes), values)
        return
    for part in parts:
        sql, converters = _many(part.shape(), conn.dialect)
        columns = part.shape()[1]
        conn.exec_driver_sql(sql, [_converted(row, columns, converters) for row in part.rows])


def _converted(
    row: Mapping[str, Any], columns: tuple[str, ...], converters: tuple[Convert, ...]
) -> tuple[Any, ...]:
    values = (row[c] for c in columns)
    return tuple(v if f is None else f(v) for f, v in zip(converters, values, strict=True))


@lru_cache(maxsize=64)
def _many(shape: Shape, dialect: Dialect) -> tuple[str, tuple[Convert, ...]]:
    """SQLite: the insert of one row (``?`` placeholders) and each column's bind processor."""
    table, columns, tail = shape
    sql = (
        f"INSERT INTO {table.name} ({', '.join(columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)}){tail}"
    )
    types = (table.c[c].type.dialect_impl(dialect) for c in columns)
    return sql, tuple(t.bind_processor(dialect) for t in types)


def _recordset(dialect: Dialect, part: Rows) -> str:
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


@lru_cache(maxsize=64)
def _combined(shapes: tuple[Shape, ...]) -> sa.TextClause:
    *parts, main = [_recordset_sql(shape, f"w{k}") for k, shape in enumerate(shapes)]
    withs = ", ".join(f"w{k} AS ({sql})" for k, sql in enumerate(parts))
    sql = f"WITH {withs} {main}" if withs else main
    typed = [sa.bindparam(f"w{k}", type_=sa.Text()) for k in range(len(shapes))]
    return sa.text(sql).bindparams(*typed)


def _recordset_sql(shape: Shape, name: str) -> str:
    """``INSERT INTO table (columns) SELECT columns FROM jsonb_populate_recordset(…)``, in
    the array's order, then the tail."""
    table, columns, tail = shape
    listed = ", ".join(columns)
    return (
        f"INSERT INTO {table.name} ({listed}) SELECT {listed} FROM jsonb_populate_recordset("
        f"NULL::{table.name}, CAST(:{name} AS jsonb)) WITH ORDINALITY AS r ORDER BY ordinality"
        f"{tail}"
    )
