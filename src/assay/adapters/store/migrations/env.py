"""Alembic environment for the ledger.

``Ledger.migrate()`` hands over an open connection (inside a transaction it holds a lock on) via
``config.attributes["connection"]``; the migrations then run in that transaction. For a
developer running ``alembic`` by hand, ``sqlalchemy.url`` in the config is used instead.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from assay.adapters.store.schema import metadata

config = context.config


def _run(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("the ledger migrations run online only, against a live database")

_given = config.attributes.get("connection")
if _given is not None:
    _run(_given)
else:
    _url = config.get_main_option("sqlalchemy.url")
    if not _url:
        raise RuntimeError("no connection given and no sqlalchemy.url configured")
    _engine = sa.create_engine(_url)
    try:
        with _engine.connect() as _connection:
            _run(_connection)
            _connection.commit()
    finally:
        _engine.dispose()
