"""What a worker refuses before it touches anything: an open beyond the runs it may hold (two
queues' gates each let a poll begin below capacity), and the close of a lost run of another
repository's task (retried until a worker of that repository takes it)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from assay.engine.temporal.activities import OTHER_REPOSITORY, Activities
from assay.engine.temporal.calls import CloseIn, Opened
from assay.engine.temporal.effects import WORKER_STOPPING
from assay.engine.temporal.holding import RunsHeld
from assay.engine.temporal.table import OPEN


class _Runs(RunsHeld):
    def __init__(self) -> None:
        super().__init__(queue="worker-1", heartbeat_every=3600)
        self.stopping = lambda: False
        self.opened: list[Any] = []
        self.release = asyncio.Event()

    async def open(self, call: Any) -> Opened:
        self.opened.append(call)
        await self.release.wait()
        return Opened(None, not_runnable="scripted")

    async def close(self, call: Any) -> Any:  # pragma: no cover - not used
        raise NotImplementedError


def test_an_open_beyond_capacity_is_refused_as_a_stopping_worker_refuses_it() -> None:
    runs = _Runs()
    runs.capacity = 1

    async def scenario() -> tuple[ApplicationError, bool, int]:
        first = asyncio.ensure_future(runs.perform(OPEN, "first"))
        await asyncio.sleep(0)  # in flight: counted, though it holds no run yet
        assert runs.busy and runs.opening == 1
        with pytest.raises(ApplicationError) as refused:
            await asyncio.wait_for(runs.perform(OPEN, "second"), 5)
        runs.release.set()
        await first
        return refused.value, runs.busy, runs.opening

    refused, busy, opening = asyncio.run(scenario())
    assert refused.type == WORKER_STOPPING and refused.non_retryable
    assert "holds all the runs it may" in str(refused)
    assert runs.opened == ["first"]  # the second never reached open
    assert not busy and opening == 0  # the count is given back once the open ends


def test_the_close_of_another_repository_s_lost_run_is_refused_and_retried(
    tmp_path: Path,
) -> None:
    task = SimpleNamespace(
        id="t-a",
        repository="repo-a",
        belongs_elsewhere=lambda mine: mine != "repo-a",
    )
    ledger = SimpleNamespace(get_task=lambda task_id: task)
    activities = Activities(
        queue="worker-b",
        repo=tmp_path,
        home=tmp_path,
        ledger=ledger,  # type: ignore[arg-type]
        effects_for=lambda *_a: None,  # type: ignore[arg-type,return-value]
        contract_for=lambda _task_id: None,  # type: ignore[arg-type,return-value]
        heartbeat_every=3600,
        repository="repo-b",
    )
    refused_close = "closed by another repository's worker"
    activities._close = lambda _call: pytest.fail(refused_close)  # type: ignore[method-assign]

    with pytest.raises(ApplicationError) as refused:
        asyncio.run(activities.close(CloseIn("t-a", "r-1", "lost")))
    assert refused.value.type == OTHER_REPOSITORY and not refused.value.non_retryable
    assert "belongs to the repository repo-a" in str(refused.value)
