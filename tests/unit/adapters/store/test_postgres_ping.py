"""A pooled PostgreSQL connection is pinged before use only after it sat idle: back-to-back
ledger calls cost no ping round trip, and a connection the server dropped while idle is
replaced before the call that takes it, which then succeeds."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from ledger_driver import LedgerTarget

from assay.adapters.store import connect
from assay.adapters.store.errors import TaskNotFound
from assay.adapters.store.sql import Ledger


def _postgres(target: LedgerTarget) -> Ledger:
    if target.backend != "postgresql":
        pytest.skip("pooled connections are pinged on PostgreSQL only")
    return target.open()


def _count_pings(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    dialect = ledger._engine.dialect
    ping = dialect.do_ping
    pings: list[object] = []

    def counted(dbapi_connection: Any) -> bool:
        pings.append(dbapi_connection)
        return ping(dbapi_connection)

    monkeypatch.setattr(dialect, "do_ping", counted)
    return pings


def _backend_pid(ledger: Ledger) -> int:
    with ledger.read() as conn:
        return int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())


def test_back_to_back_calls_send_no_ping(
    target: LedgerTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = _postgres(target)
    pings = _count_pings(ledger, monkeypatch)
    for _ in range(5):
        ledger.list_tasks()
    assert pings == []

    monkeypatch.setattr(connect, "PING_AFTER_IDLE_SECONDS", 0.0)  # every gap is idle now
    ledger.list_tasks()
    assert len(pings) == 1


def test_a_connection_dropped_while_idle_is_replaced(
    target: LedgerTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = _postgres(target)
    pings = _count_pings(ledger, monkeypatch)
    dropped = _backend_pid(ledger)
    killer = sa.create_engine(target.url)
    with killer.begin() as conn:
        assert conn.execute(sa.select(sa.func.pg_terminate_backend(dropped))).scalar_one()
    killer.dispose()

    monkeypatch.setattr(connect, "PING_AFTER_IDLE_SECONDS", 0.0)
    with pytest.raises(TaskNotFound):  # the call ran (on a new connection) and found no task
        ledger.get_task("nope")
    assert len(pings) == 1
    assert _backend_pid(ledger) != dropped
