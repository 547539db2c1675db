"""The runs' search attributes: a namespace that has them (as ``assay dev-server`` registers
them) finds a run's workflow by task, repository and status, the status kept up to date by the
workflow; a namespace without them is told once how to register them, and its workflows start
and run without them (the session's server has none)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.scripted_effects import (
    Script,
    ScriptedWorker,
    TemporalEnv,
    queue_name,
    temporal_workers,
    wait_for,
)
from support.temporal import require_binary
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from assay.adapters.temporal_connection import TemporalConnection
from assay.engine.temporal import client as client_module
from assay.engine.temporal.calls import RunOutcome, StopRequest
from assay.engine.temporal.client import connect, submit
from assay.engine.temporal.config import STOP_SIGNAL, repository_queue
from assay.engine.temporal.search import KEYS, REPOSITORY, STATUS, TASK_ID
from assay.engine.temporal.table import Queue
from assay.engine.temporal.workflow import RunWorkflow

ENDS_WITHIN = 60.0
REPO = "git@host:team/app"
REGISTER = (
    "temporal operator search-attribute create --namespace default --name AssayTaskId --type "
    "Keyword --name AssayRepository --type Keyword --name AssayStatus --type Keyword"
)


@pytest.fixture(scope="module")
def indexed_env() -> Iterator[TemporalEnv]:
    """A dev server whose namespace has the search attributes."""
    loop = asyncio.new_event_loop()
    env = loop.run_until_complete(
        WorkflowEnvironment.start_local(
            dev_server_existing_path=str(require_binary()),
            data_converter=pydantic_data_converter,
            search_attributes=KEYS,
            dev_server_log_level="error",
        )
    )
    try:
        yield TemporalEnv(env, loop)
    finally:
        loop.run_until_complete(env.shutdown())
        loop.close()


async def _connected(client: Client, said: list[str]) -> Client:
    target = client.service_client.config.target_host
    return await connect(TemporalConnection(target, "default"), environ={}, on_warning=said.append)


async def _started(
    client: Client, task_id: str, shared: str, repository: str | None = None
) -> WorkflowHandle[RunWorkflow, RunOutcome]:
    handle = await submit(client, task_id, task_queue=shared, repository=repository)
    assert handle is not None
    return handle


def test_a_run_is_found_by_its_task_repository_and_status(
    indexed_env: TemporalEnv, tmp_path: Path
) -> None:
    task_id, shared = f"t-{uuid.uuid4().hex[:8]}", queue_name("shared")
    worker = ScriptedWorker(queue_name("own"), tmp_path, lambda n: Script(dispatch_hangs=True))
    said: list[str] = []

    async def scenario(plain: Client) -> tuple[dict[str, str | None], ...]:
        client = await _connected(plain, said)
        opens = repository_queue(shared, REPO)  # its repository's workers open its runs
        async with (
            temporal_workers(client, worker, shared),
            Worker(client, task_queue=opens, activities=worker.on(Queue.SHARED)),
        ):
            handle = await _started(client, task_id, shared, repository=REPO)
            await wait_for(lambda: bool(worker.effects) and len(worker.effects[0].calls) > 2, 60)
            running = _attributes(await handle.describe())
            await handle.signal(STOP_SIGNAL, StopRequest("not now"))
            await asyncio.wait_for(handle.result(), ENDS_WITHIN)
            held = _attributes(await handle.describe())
            query = f'AssayTaskId = "{task_id}" AND AssayStatus = "held"'
            found: list[str] = []
            async with asyncio.timeout(60):  # the visibility store follows within moments
                while not found:
                    found = [w.id async for w in client.list_workflows(query)]
                    await asyncio.sleep(0.1)
            assert found == [handle.id]
        return running, held

    running, held = indexed_env.run(scenario)
    assert said == []
    assert running == {"task": task_id, "repository": REPO, "status": "running"}
    assert held == {**running, "status": "held"}


def test_a_run_without_a_repository_ends_as_its_task(
    indexed_env: TemporalEnv, tmp_path: Path
) -> None:
    shared = queue_name("shared")
    worker = ScriptedWorker(queue_name("own"), tmp_path, lambda n: Script())
    task_id = f"t-{uuid.uuid4().hex[:8]}"

    async def scenario(plain: Client) -> dict[str, str | None]:
        client = await _connected(plain, [])
        async with temporal_workers(client, worker, shared):
            handle = await _started(client, task_id, shared)
            await asyncio.wait_for(handle.result(), ENDS_WITHIN)
            return _attributes(await handle.describe())

    assert indexed_env.run(scenario) == {"task": task_id, "repository": None, "status": "done"}


def test_a_namespace_without_them_is_told_once_and_its_runs_go_without(
    temporal_env: TemporalEnv, tmp_path: Path
) -> None:
    shared = queue_name("shared")
    worker = ScriptedWorker(queue_name("own"), tmp_path, lambda n: Script())
    said: list[str] = []

    async def scenario(plain: Client) -> list[RunOutcome]:
        client = await _connected(plain, said)
        outcomes = []
        async with temporal_workers(client, worker, shared):
            for _ in range(2):
                handle = await _started(client, f"t-{uuid.uuid4().hex[:8]}", shared)
                outcomes.append(await asyncio.wait_for(handle.result(), ENDS_WITHIN))
                assert _attributes(await handle.describe())["task"] is None
        return outcomes

    outcomes = temporal_env.run(scenario)
    assert [o.task_status for o in outcomes] == ["done", "done"]
    (warning,) = said
    assert "namespace 'default' has no search attribute AssayTaskId, AssayRepository, Assay" in (
        warning
    )
    assert REGISTER in warning


def test_a_namespace_that_would_not_say_is_tried_and_told_once(
    temporal_env: TemporalEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key without the right to list the namespace's search attributes: the first start
    carries them, the server's refusal is told once, and that start goes again without."""
    shared = queue_name("shared")
    worker = ScriptedWorker(queue_name("own"), tmp_path, lambda n: Script())
    said: list[str] = []

    async def would_not_say(_client: Client, namespace: str, warn: object) -> object:
        return client_module._Indexing(namespace, None, said.append)

    monkeypatch.setattr(client_module, "_indexing", would_not_say)

    async def scenario(plain: Client) -> list[str | None]:
        client = await _connected(plain, [])
        statuses = []
        async with temporal_workers(client, worker, shared):
            for _ in range(2):
                handle = await _started(client, f"t-{uuid.uuid4().hex[:8]}", shared)
                statuses.append((await asyncio.wait_for(handle.result(), ENDS_WITHIN)).task_status)
        return statuses

    assert temporal_env.run(scenario) == ["done", "done"]
    (warning,) = said
    assert REGISTER in warning


def _attributes(described: object) -> dict[str, str | None]:
    found = described.typed_search_attributes  # type: ignore[attr-defined]
    return {
        "task": found.get(TASK_ID),
        "repository": found.get(REPOSITORY),
        "status": found.get(STATUS),
    }
