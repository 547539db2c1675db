"""Statements a hot write runs on the DBAPI connection itself, inside the transaction its
SQLAlchemy connection began (SQLite: a run's close, see :mod:`run_writes`).

On SQLite a statement is no round trip, and SQLAlchemy's work around each execution (its
execution context, events and result objects) costs more than SQLite takes to run it. A
:class:`DriverStatement` keeps what SQLAlchemy would have done to the values (each column
type's own bind and result processors, so what is stored and read is the same) and skips the
rest. A driver error is raised as the SQLAlchemy exception it would have been (an
``IntegrityError`` stays one, so the ledger still reports a ``LedgerConflict``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

Convert = Callable[[Any], Any] | None


@dataclass(frozen=True)
class DriverStatement:
    """A statement's text (``?`` placeholders) and how to bind its parameters, in order."""

    sql: str
    keys: tuple[str, ...]
    processors: tuple[Convert, ...]

    @classmethod
    def build(cls, sql: str, dialect: Dialect, params: Sequence[sa.Column[Any]]) -> DriverStatement:
        """``sql`` whose placeholders take, in order, values for ``params`` (each typed by
        its column), passed in by the column's name."""
        types = (c.type.dialect_impl(dialect) for c in params)
        processors = tuple(t.bind_processor(dialect) for t in types)
        return cls(sql, tuple(c.name for c in params), processors)

    def bind(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        pairs = zip(self.processors, (values[k] for k in self.keys), strict=True)
        return tuple(v if f is None else f(v) for f, v in pairs)


def execute(
    conn: sa.Connection, statement: DriverStatement, values: Mapping[str, Any]
) -> list[tuple[Any, ...]]:
    """Run ``statement`` once; its rows (as the driver gives them: see :func:`reader`)."""
    params = statement.bind(values)
    with _as_sqlalchemy(conn, statement.sql, params, many=False):
        rows: list[tuple[Any, ...]] = _driver(conn).execute(statement.sql, params).fetchall()
    return rows


def execute_many(
    conn: sa.Connection, statement: DriverStatement, rows: Sequence[Mapping[str, Any]]
) -> None:
    """Run ``statement`` once per row (one prepared statement, stepped per row)."""
    params = [statement.bind(row) for row in rows]
    with _as_sqlalchemy(conn, statement.sql, params, many=True):
        _driver(conn).executemany(statement.sql, params)


Reader = Callable[[Sequence[Any]], dict[str, Any]]


def reader(dialect: Dialect, columns: Sequence[sa.Column[Any]]) -> Reader:
    """Turns a driver row of ``columns`` into values as SQLAlchemy would read them."""
    processors = [c.type.dialect_impl(dialect).result_processor(dialect, None) for c in columns]
    names = [c.name for c in columns]

    def read(row: Sequence[Any]) -> dict[str, Any]:
        pairs = zip(names, processors, row, strict=True)
        return {name: v if f is None else f(v) for name, f, v in pairs}

    return read


def _driver(conn: sa.Connection) -> Any:
    return conn.connection.driver_connection


@contextmanager
def _as_sqlalchemy(conn: sa.Connection, sql: str, params: Any, *, many: bool) -> Iterator[None]:
    base = conn.dialect.loaded_dbapi.Error
    try:
        yield
    except base as exc:
        raise sa.exc.DBAPIError.instance(
            sql, params, exc, base, dialect=conn.dialect, ismulti=many
        ) from exc
