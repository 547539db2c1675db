"""Workers of two repositories on one shared queue: a task's run is opened only by a worker of
the repository it belongs to; the other never claims, holds or fails it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import pytest
from support.repo import make_repo
from support.scripted_effects import (
    Script,
    ScriptedEffects,
    TemporalEnv,
    queue_name,
    wait_for,
)
from temporalio.client import Client
from temporalio.runtime import Runtime, TelemetryConfig

from assay.adapters.origin import OriginError
from assay.adapters.store.sql import Ledger
from assay.core.contract import Contract, parse_contract
from assay.core.tasks import Task
from assay.core.vocab import EventKind, TaskStatus
from assay.engine.effects import OpenRequest, RunHandle
from assay.engine.temporal.activities import Activities
from assay.engine.temporal.calls import Opened, RunInput, RunOutcome
from assay.engine.temporal.client import submit
from assay.engine.temporal.config import repository_queue, workflow_id
from assay.engine.temporal.worker import run_worker
from assay.engine.temporal.workflow import RunWorkflow

ENDS_WITHIN = 60.0
CONTRACT = (
    'task: x\nscope: {allow: ["src/**"]}\ncoder: {kind: command, command: "true"}\n'
    'validators:\n  - {id: ok, kind: command, run: "true"}\nland: none\nsandbox: none\n'
)


class RepositoryWorker(Activities):
    """The production activities of a worker of ``repository``, its runs scripted (no coder
    runs); ``asked`` is every task whose open reached it."""

    def __init__(self, repository: str, repo: Path, home: Path, ledger: Ledger) -> None:
        contract: Contract = parse_contract(CONTRACT, "c.yaml")
        super().__init__(
            queue=queue_name(f"own-{repository}"),
            repo=repo,
            home=home,
            ledger=ledger,
            effects_for=lambda _task, _contract: ScriptedEffects(Script(), home),
            contract_for=lambda _task_id: contract,
            heartbeat_every=0.1,
            repository=repository,
        )
        self.asked: list[str] = []

    async def open(self, call: OpenRequest) -> Opened:
        self.asked.append(call.task_id)
        return await super().open(call)


@pytest.fixture
def world(tmp_path: Path) -> tuple[Ledger, RepositoryWorker, RepositoryWorker]:
    repo = make_repo(tmp_path).root
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'assay.db'}")
    now = datetime.now(UTC)
    ledger.add_task(Task.new(id="t-a", title="a", instruction="x", now=now, repository="repo-a"))
    a = RepositoryWorker("repo-a", repo, tmp_path / "home-a", ledger)
    b = RepositoryWorker("repo-b", repo, tmp_path / "home-b", ledger)
    return ledger, a, b


async def machine(client: Client) -> Client:
    """A client of the same server as another machine's: a runtime of its own (the SDK allows
    one worker of a queue per runtime)."""
    return await Client.connect(
        client.service_client.config.target_host,
        namespace=client.namespace,
        data_converter=client.data_converter,
        runtime=Runtime(telemetry=TelemetryConfig()),
    )


@contextlib.asynccontextmanager
async def serving(client: Client, worker: Activities, shared: str) -> AsyncIterator[None]:
    """``worker`` served as ``assay worker`` serves it (its pollers, its gates), as if on a
    machine of its own."""
    stop = asyncio.Event()
    own = await machine(client)
    task = asyncio.create_task(
        run_worker(own, task_queue=shared, activities=worker, max_runs=2, stop=stop)
    )
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, ENDS_WITHIN)


def _untouched_by(ledger: Ledger, task_id: str) -> None:
    """Neither held nor failed nor claimed in the ledger (the scripted run writes nothing)."""
    task = ledger.get_task(task_id)
    assert task.status is TaskStatus.QUEUED and task.attempts == 0
    assert [e.kind for e in ledger.events(task_id)] == [EventKind.TASK_ADDED]


def test_a_task_opens_on_its_repository_s_queue_and_only_its_worker_takes_it(
    temporal_env: TemporalEnv, world: tuple[Ledger, RepositoryWorker, RepositoryWorker]
) -> None:
    ledger, a, b = world
    shared = queue_name("shared")

    async def scenario(client: Client) -> RunOutcome:
        # B alone serves first: the open waits for A's worker instead of going to B.
        async with serving(client, b, shared):
            handle = await submit(client, "t-a", task_queue=shared, repository="repo-a")
            assert handle is not None
            await asyncio.sleep(2.0)
            assert b.asked == []
            async with serving(client, a, shared):
                return await asyncio.wait_for(handle.result(), ENDS_WITHIN)

    outcome = temporal_env.run(scenario)
    assert outcome.status == "merged" and len(outcome.runs) == 1 and outcome.lost == 0
    assert a.asked == ["t-a"] and b.asked == []
    _untouched_by(ledger, "t-a")


def test_a_worker_of_another_repository_refuses_an_open_on_the_shared_queue(
    temporal_env: TemporalEnv, world: tuple[Ledger, RepositoryWorker, RepositoryWorker]
) -> None:
    """A workflow started with no repository queue (an older serve) opens on the shared queue,
    where any worker polls: B refuses it as a stopping worker does, the workflow asks again,
    and A opens it."""
    ledger, a, b = world
    shared = queue_name("shared")

    async def scenario(client: Client) -> RunOutcome:
        async with serving(client, b, shared):
            handle = await client.start_workflow(
                RunWorkflow.run,
                RunInput(task_id="t-a", task_queue=shared),
                id=workflow_id("t-a") + queue_name("-legacy"),
                task_queue=shared,
            )
            await wait_for(lambda: len(b.asked) >= 2)  # refused, and asked again
            assert not b.runs
            async with serving(client, a, shared):
                return await asyncio.wait_for(handle.result(), ENDS_WITHIN)

    outcome = temporal_env.run(scenario)
    assert outcome.status == "merged" and len(outcome.runs) == 1 and outcome.lost == 0
    assert a.asked[-1] == "t-a" and not b.runs
    _untouched_by(ledger, "t-a")


def test_the_repository_queue_is_the_shared_one_for_a_task_of_none() -> None:
    assert repository_queue("assay", None) == "assay"
    mine = repository_queue("assay", "github.com/o/r")
    assert mine.startswith("assay@") and len(mine) == len("assay@") + 12
    assert mine == repository_queue("assay", "github.com/o/r")
    assert mine != repository_queue("assay", "github.com/o/s")


class UnreachableOnce(ScriptedEffects):
    """A run whose first open meets an origin that does not answer."""

    failures: ClassVar[list[str]] = []

    async def open(self, call: OpenRequest) -> RunHandle:
        if not UnreachableOnce.failures:
            UnreachableOnce.failures.append(call.run_id)
            raise OriginError("fetching main from origin failed: Connection refused")
        return await super().open(call)


def test_an_unreachable_origin_leaves_the_task_queued_and_the_open_is_asked_again(
    temporal_env: TemporalEnv,
    world: tuple[Ledger, RepositoryWorker, RepositoryWorker],
    tmp_path: Path,
) -> None:
    ledger, a, _ = world
    UnreachableOnce.failures.clear()
    a.effects_for = lambda _task, _contract: UnreachableOnce(Script(), tmp_path / "home-a")
    shared = queue_name("shared")
    seen: list[TaskStatus] = []

    async def scenario(client: Client) -> RunOutcome:
        async with serving(client, a, shared):
            handle = await submit(client, "t-a", task_queue=shared, repository="repo-a")
            assert handle is not None
            await wait_for(lambda: bool(UnreachableOnce.failures))
            task = ledger.get_task("t-a")  # refused before any claim
            seen.append(task.status)
            assert task.attempts == 0 and not a.runs
            return await asyncio.wait_for(handle.result(), ENDS_WITHIN)

    outcome = temporal_env.run(scenario)
    assert seen == [TaskStatus.QUEUED]
    assert outcome.status == "merged" and len(outcome.runs) == 1 and outcome.lost == 0
    assert a.asked == ["t-a", "t-a"]  # the refused open, then the one that ran
