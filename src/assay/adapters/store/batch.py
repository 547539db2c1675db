"""Many rows, and many tables' rows, written in one statement: one round trip, not one per row.

A run's close writes rows into five tables. Each table's rows go in one multi-row ``INSERT``;
on PostgreSQL all of the tables' inserts go in one statement, the first ones as data-modifying
``WITH`` parts and the last as the main insert. Each part runs exactly once and to completion;
the order of the parts is the server's to choose, but foreign keys are checked at the end of
the statement (a dispatch may reference an attempt inserted beside it), and the main insert
draws its ids in the order of its rows (the events' order is kept: they come last).

Written as text because SQLAlchemy compiles a multi-row ``insert().values([…])`` again on every
execution (it does not cache those), which costs more than the round trips saved; a text
statement with typed parameters is compiled once per shape, and still serializes JSON and
times, and casts them on PostgreSQL, as the columns' types say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import sqlalchemy as sa

ROWS_PER_STATEMENT = 200
"""Rows in one multi-row ``INSERT``: far below SQLite's and PostgreSQL's parameter limits."""

Shape = tuple[sa.Table, tuple[str, ...], int, str]
"""A statement's table, columns, number of rows and tail; the key its text is cached under."""


@dataclass(frozen=True)
class Rows:
    """Rows for one table, all with the same keys, and an optional ``ON CONFLICT`` tail."""

    table: sa.Table
    rows: Sequence[Mapping[str, Any]]
    tail: str = ""

    def shape(self) -> Shape:
        return (self.table, tuple(self.rows[0]), len(self.rows), self.tail)


def insert(conn: sa.Connection, parts: Sequence[Rows]) -> None:
    """Insert every part's rows, the parts' ids drawn in order within each part.

    PostgreSQL: one statement for all of them when each part fits in one; otherwise (and on
    SQLite, where a statement is no round trip) one statement per part, in the order given.
    """
    parts = [p for p in parts if p.rows]
    if not parts:
        return
    if conn.dialect.name == "postgresql" and all(len(p.rows) <= ROWS_PER_STATEMENT for p in parts):
        values: dict[str, Any] = {}
        for k, part in enumerate(parts):
            values.update(_values(part.rows, f"w{k}"))
        conn.execute(_combined(tuple(p.shape() for p in parts)), values)
        return
    for part in parts:
        for first in range(0, len(part.rows), ROWS_PER_STATEMENT):
            chunk = Rows(part.table, part.rows[first : first + ROWS_PER_STATEMENT], part.tail)
            conn.execute(_single(chunk.shape()), _values(chunk.rows, ""))


@lru_cache(maxsize=256)
def _single(shape: Shape) -> sa.TextClause:
    sql, typed = _insert_sql(shape, "")
    return sa.text(sql).bindparams(*typed)


@lru_cache(maxsize=256)
def _combined(shapes: tuple[Shape, ...]) -> sa.TextClause:
    built = [_insert_sql(shape, f"w{k}") for k, shape in enumerate(shapes)]
    *parts, (main, _typed) = built
    withs = ", ".join(f"w{k} AS ({sql})" for k, (sql, _typed) in enumerate(parts))
    sql = f"WITH {withs} {main}" if withs else main
    return sa.text(sql).bindparams(*(b for _sql, typed in built for b in typed))


def _insert_sql(shape: Shape, prefix: str) -> tuple[str, list[sa.BindParameter[Any]]]:
    """``INSERT INTO table (columns) VALUES (…), …`` then the tail, and its typed parameters,
    named ``<prefix>r<row>_<column>`` (never like SQLAlchemy's own ``<column>_<n>``)."""
    table, columns, count, tail = shape
    names = [[f"{prefix}r{i}_{c}" for c in columns] for i in range(count)]
    values = ", ".join("(" + ", ".join(f":{n}" for n in row) + ")" for row in names)
    sql = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES {values}{tail}"
    typed = [
        sa.bindparam(name, type_=table.c[c].type)
        for row in names
        for name, c in zip(row, columns, strict=True)
    ]
    return sql, typed


def _values(rows: Sequence[Mapping[str, Any]], prefix: str) -> dict[str, Any]:
    return {f"{prefix}r{i}_{c}": value for i, row in enumerate(rows) for c, value in row.items()}
