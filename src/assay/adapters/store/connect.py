"""Where the ledger lives and how to connect to it.

SQLite by default (``<ASSAY_HOME or .assay>/assay.db``), in WAL mode so readers never block the
writer, with a busy timeout so concurrent writers queue instead of failing. Write transactions
on SQLite start with ``BEGIN IMMEDIATE``: taking the write lock up front means a transaction
that read first cannot later fail to upgrade (in WAL mode that failure skips the busy
handler). ``ASSAY_DATABASE_URL`` (e.g. ``postgresql+psycopg://...``) switches to PostgreSQL.

A write that still finds the file locked after the busy timeout (``ASSAY_DB_TIMEOUT`` seconds,
default 15) raises :class:`LedgerLocked`, which names the file, instead of SQLAlchemy's
``OperationalError``.

SQLAlchemy is imported only when an engine is made: the constants, :func:`default_url` and
:class:`LedgerLocked` serve commands that never open the ledger through it.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.adapters.store.names import DATABASE_URL_ENV, DEFAULT_HOME, HOME_ENV

DB_FILE = "assay.db"
DB_TIMEOUT_ENV = "ASSAY_DB_TIMEOUT"
DEFAULT_TIMEOUT_SECONDS = 15.0
WRITE_OPTION = "assay_write"
"""Execution option marking a connection whose next transaction writes (SQLite: IMMEDIATE)."""

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy.engine import URL

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


class LedgerLocked(Exception):
    """Another process held the ledger's SQLite file locked for the whole busy timeout."""

    def __init__(self, database: str, timeout_seconds: float) -> None:
        self.database = database
        self.timeout_seconds = timeout_seconds
        super().__init__(
            f"the ledger database {database} is locked by another process "
            f"(waited {timeout_seconds:g} s; ${DB_TIMEOUT_ENV} sets how long to wait)"
        )


def busy_timeout_seconds() -> float:
    """How long a write waits for another process's lock: ``$ASSAY_DB_TIMEOUT`` or 15 s."""
    raw = os.environ.get(DB_TIMEOUT_ENV, "")
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_TIMEOUT_SECONDS
    return value if 0 <= value <= 3600 else DEFAULT_TIMEOUT_SECONDS


def default_url() -> str:
    """``ASSAY_DATABASE_URL`` if set, else the SQLite file under ``ASSAY_HOME`` (or .assay)."""
    configured = os.environ.get(DATABASE_URL_ENV)
    if configured:
        return configured
    home = Path(os.environ.get(HOME_ENV) or DEFAULT_HOME)
    return f"sqlite:///{(home / DB_FILE).absolute()}"


def make_engine(url: str | URL, *, schema: str | None = None) -> sa.Engine:
    """An engine for ``url`` with the pragmas and transaction rules the ledger relies on.

    ``schema`` (PostgreSQL only) puts every table in that schema via ``search_path``; tests use
    it to get a fresh, disposable schema.
    """
    import sqlalchemy as sa
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if schema is not None:
            raise ValueError("a schema is a PostgreSQL option; SQLite has one per file")
        return _sqlite_engine(parsed)
    if backend != "postgresql":
        raise ValueError(f"unsupported ledger database {backend!r}: use sqlite or postgresql")
    connect_args: dict[str, Any] = {}
    if schema is not None:
        if not _SCHEMA_NAME.fullmatch(schema):
            raise ValueError(f"invalid schema name {schema!r}")
        connect_args["options"] = f"-csearch_path={schema}"
    engine = sa.create_engine(parsed, connect_args=connect_args)
    _ping_after_idle(engine)
    return engine


PING_AFTER_IDLE_SECONDS = 1.0
"""A pooled PostgreSQL connection idle this long is pinged before it is used again."""


def _ping_after_idle(engine: sa.Engine) -> None:
    """Ping a pooled connection before use only if it sat idle (SQLAlchemy's ``pool_pre_ping``
    pings before every use: a round trip more per transaction). Idle is when a server restart,
    an idle timeout or a dropped link finds a connection; one that failed its ping is replaced,
    and the pool's older ones discarded, as ``pool_pre_ping`` does."""
    import sqlalchemy as sa
    from sqlalchemy import event

    dialect = engine.dialect

    @event.listens_for(engine, "checkin")
    def _returned(_dbapi_connection: Any, record: Any) -> None:
        record.info["returned_at"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _taken(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        returned = record.info.get("returned_at")  # None: new (its info goes with it)
        if returned is None or time.monotonic() - returned < PING_AFTER_IDLE_SECONDS:
            return
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as exc:
            if not dialect.is_disconnect(exc, dbapi_connection, None):
                raise
            raise sa.exc.InvalidatePoolError() from exc


def _sqlite_engine(url: URL) -> sa.Engine:
    import sqlalchemy as sa
    from sqlalchemy import event

    database = url.database
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(url)
    timeout = busy_timeout_seconds()

    @event.listens_for(engine, "handle_error")
    def _on_error(context: sa.engine.ExceptionContext) -> BaseException | None:
        original = context.original_exception
        if isinstance(original, sqlite3.OperationalError) and _is_locked(original):
            return LedgerLocked(database or ":memory:", timeout)
        return None

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Autocommit at the driver level: transactions are begun explicitly below, so
        # pysqlite's own implicit BEGIN never picks the (deferred) mode for us.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            _ensure_wal(cursor, timeout)
            cursor.execute("PRAGMA foreign_keys=ON")
            # Safe with WAL: a crash never corrupts or half-applies; it can lose only the
            # newest commits on power loss, which is the trade SQLite recommends for WAL.
            cursor.execute("PRAGMA synchronous=NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: sa.Connection) -> None:
        writing = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writing else "BEGIN")

    return engine


def _is_locked(error: sqlite3.OperationalError) -> bool:
    return "locked" in str(error) or "busy" in str(error)


def _ensure_wal(cursor: Any, timeout: float) -> None:
    """Put the database in WAL mode (it persists in the file, so this is usually a read).

    Switching a new file to WAL needs an exclusive lock, and SQLite reports a clash there as
    busy without calling the busy handler; connections opening a new file at the same moment
    therefore retry here, within the busy timeout, instead of failing.
    """
    if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)
