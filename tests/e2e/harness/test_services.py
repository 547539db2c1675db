"""The shared service fixtures work: a real workflow on the session dev server, a fresh
PostgreSQL database per test, and a missing service that skips locally but fails in CI."""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import timedelta

import pytest
import sqlalchemy as sa
from support import postgres
from support.services import service_missing
from support.temporal import DevServer, ExternalServer

from assay.adapters.store.sql import Ledger

temporalio = pytest.importorskip("temporalio")

from temporalio import activity, workflow  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.worker import UnsandboxedWorkflowRunner, Worker  # noqa: E402


@activity.defn
async def shout(word: str) -> str:
    return word.upper() + "!"


@workflow.defn
class Smoke:
    @workflow.run
    async def run(self, word: str) -> str:
        return await workflow.execute_activity(
            shout, word, start_to_close_timeout=timedelta(seconds=30)
        )


def test_a_workflow_runs_on_the_session_dev_server(
    temporal_server: DevServer | ExternalServer,
) -> None:
    async def go() -> str:
        client = await Client.connect(temporal_server.address)
        queue = f"smoke-{uuid.uuid4().hex}"
        async with Worker(
            client,
            task_queue=queue,
            workflows=[Smoke],
            activities=[shout],
            workflow_runner=UnsandboxedWorkflowRunner(),
        ):
            return await client.execute_workflow(
                Smoke.run, "hello", id=f"smoke-{uuid.uuid4().hex}", task_queue=queue
            )

    assert asyncio.run(go()) == "HELLO!"


@pytest.mark.parametrize("round_", [1, 2])
def test_each_test_gets_its_own_empty_database(postgres_url: str, round_: int) -> None:
    assert os.environ["ASSAY_DATABASE_URL"] == postgres_url
    name = sa.engine.make_url(postgres_url).database
    assert name is not None and name.startswith("assay_")
    ledger = Ledger.open(postgres_url)  # migrated from empty
    try:
        tasks, unreadable = ledger.scan_tasks()
        assert tasks == [] and unreadable == []
    finally:
        ledger.close()
    # Had the rounds shared a database, the second CREATE TABLE would fail.
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE mark (round int)"))
        conn.execute(sa.text("INSERT INTO mark VALUES (:r)"), {"r": round_})
        assert conn.execute(sa.text("SELECT count(*) FROM mark")).scalar_one() == 1
    engine.dispose()


def test_the_database_is_dropped_after_its_test() -> None:
    url = postgres.create_database()
    name = sa.engine.make_url(url).database
    postgres.drop_database(url)
    admin = sa.create_engine(postgres.server_url())
    with admin.connect() as conn:
        found = conn.execute(
            sa.text("SELECT count(*) FROM pg_database WHERE datname = :n"), {"n": name}
        ).scalar_one()
    admin.dispose()
    assert found == 0


def test_an_unreachable_postgres_skips_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv(postgres.SERVER_ENV, "postgresql+psycopg://postgres@127.0.0.1:1/test")
    with pytest.raises(pytest.skip.Exception, match=r"127\.0\.0\.1:1/test is unreachable"):
        postgres.create_database()


def test_an_unreachable_postgres_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv(postgres.SERVER_ENV, "postgresql+psycopg://postgres@127.0.0.1:1/test")
    with pytest.raises(pytest.fail.Exception, match="CI=true, but PostgreSQL"):
        postgres.create_database()


def test_a_missing_service_fails_only_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="no such thing"):
        service_missing("no such thing")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true, but no such thing"):
        service_missing("no such thing")
