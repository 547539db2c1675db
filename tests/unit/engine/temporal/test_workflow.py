"""RunWorkflow in Temporal's test environment: the production workflow, in its sandbox, calling
activities registered under the production names (made from the effect table) and performed
by a worker holding scripted runs (:mod:`support.scripted_effects`). A pass, a stop (signal
or cancellation), a stop before any run opened, a lost worker (restarted, or silent past its
heartbeat), lost workers in a row, and a lost run settle held: no process, no ledger."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path

import pytest
from support.scripted_effects import (
    Script,
    ScriptedWorker,
    TemporalEnv,
    queue_name,
    run_input,
    temporal_workers,
    wait_for,
)
from temporalio.client import Client, WorkflowHandle

from assay.core.vocab import Severity
from assay.engine.temporal.calls import RunInput, RunOutcome, StopRequest
from assay.engine.temporal.config import STOP_SIGNAL, close_queue
from assay.engine.temporal.worker import run_worker
from assay.engine.temporal.workflow import RunWorkflow
from assay.engine.worker import Cadence

TASK = "t1"
ENDS_WITHIN = 60.0  # seconds: a workflow that loops or hangs fails its test


async def _run(client: Client, run: RunInput, stop: StopRequest | None = None) -> RunOutcome:
    """The workflow's outcome; ``stop``: signalled with its start (before it opens a run)."""
    handle = await client.start_workflow(
        RunWorkflow.run,
        run,
        id=f"assay-test-{uuid.uuid4().hex[:10]}",
        task_queue=run.task_queue,
        start_signal=STOP_SIGNAL if stop is not None else None,
        start_signal_args=[stop] if stop is not None else [],
    )
    return await _result(handle)


async def _result(handle: WorkflowHandle[RunWorkflow, RunOutcome]) -> RunOutcome:
    return await asyncio.wait_for(handle.result(), ENDS_WITHIN)


def _names(worker: ScriptedWorker, run: int = 0) -> list[str]:
    return [c.name for c in worker.effects[run].calls if c.name != "emit"]


def test_a_run_is_opened_performed_and_recorded_on_the_worker_that_opened_it(
    temporal_env: TemporalEnv, tmp_path: Path
) -> None:
    shared = queue_name("shared")
    worker = ScriptedWorker(
        queue_name("own"), tmp_path, lambda n: Script([Severity.BLOCK, Severity.PASS])
    )

    async def scenario(client: Client) -> RunOutcome:
        async with temporal_workers(client, worker, shared):
            return await _run(client, run_input(TASK, shared))

    outcome = temporal_env.run(scenario)
    (fx,) = worker.effects
    assert outcome.runs == [fx.calls[0].value.run_id] and outcome.status == "merged"
    assert (outcome.lost, outcome.stopped, outcome.task_status) == (0, False, "done")
    assert outcome.payload_path == str(tmp_path / outcome.runs[0] / "payload.json")
    # Preflight and arm done while opening; a blocked attempt, then one that passes.
    assert _names(worker) == [
        "open", "preflight", "arm",
        "dispatch", "fired_halts", "validate",
        "dispatch", "fired_halts", "validate", "land",
        "record",
    ]  # fmt: skip
    # The events rode with the calls: each written once, in order, before the record.
    kinds = [c.value.kind.value for c in fx.calls if c.name == "emit"]
    assert kinds[0] == "run.started" and kinds.count("attempt.started") == 2
    assert [c.name for c in fx.calls][-1] == "record"
    assert worker.runs == {} and fx.closed and worker.closes == []  # let go once recorded


@pytest.mark.parametrize("how", ["signal", "cancel"])
def test_a_stop_cancels_the_dispatch_closes_the_run_on_its_worker_and_holds_the_task(
    temporal_env: TemporalEnv, tmp_path: Path, how: str
) -> None:
    shared = queue_name("shared")
    worker = ScriptedWorker(queue_name("own"), tmp_path, lambda n: Script(dispatch_hangs=True))

    async def scenario(client: Client) -> RunOutcome:
        async with temporal_workers(client, worker, shared):
            handle = await client.start_workflow(
                RunWorkflow.run,
                run_input(TASK, shared),
                id=f"assay-test-{uuid.uuid4().hex[:10]}",
                task_queue=shared,
            )
            await wait_for(lambda: bool(worker.effects) and "dispatch" in _names(worker))
            if how == "signal":
                await handle.signal(
                    STOP_SIGNAL, StopRequest("not now", True, "ada", "web", "cancel")
                )
            else:
                await handle.cancel()
            return await _result(handle)

    outcome = temporal_env.run(scenario)
    reason = "not now" if how == "signal" else "the workflow was cancelled"
    assert outcome.stopped and outcome.note == reason
    assert outcome.task_status == "held" and outcome.status == "failed"
    (fx,) = worker.effects
    run_id = outcome.runs[0]
    ((queue, close),) = worker.closes
    assert queue == worker.queue  # its own worker: it stops the coders and removes the seats
    assert (close.run_id, close.reason, close.hold) == (run_id, f"interrupted: {reason}", reason)
    # Who sent the stop rides with the close, to be recorded with the hold.
    who = ("ada", "web", "cancel") if how == "signal" else (None, None, "hold")
    assert (close.by, close.via, close.action) == who
    assert close.contract == fx.calls[1].value.contract  # the run's, from its plan
    assert _names(worker)[-1] == "dispatch"  # nothing after the cancelled dispatch
    assert worker.runs == {} and fx.closed


def test_a_stop_before_any_run_opened_only_holds_the_task(
    temporal_env: TemporalEnv, tmp_path: Path
) -> None:
    shared = queue_name("shared")
    worker = ScriptedWorker(queue_name("own"), tmp_path, lambda n: Script())

    async def scenario(client: Client) -> RunOutcome:
        async with temporal_workers(client, worker, shared):
            return await _run(client, run_input(TASK, shared), StopRequest("not now"))

    outcome = temporal_env.run(scenario)
    assert outcome.stopped and outcome.runs == [] and outcome.task_status == "held"
    assert worker.effects == []  # nothing opened
    ((queue, close),) = worker.closes
    assert queue == close_queue(shared) and close.run_id is None and close.hold == "not now"


def test_a_stopping_worker_opens_no_run_another_worker_opens_it(
    temporal_env: TemporalEnv, tmp_path: Path
) -> None:
    shared = queue_name("shared")
    stopping = ScriptedWorker(queue_name("own"), tmp_path / "a", lambda n: Script())
    refused: list[bool] = []
    stopping.stopping = lambda: refused.append(True) or True  # SIGTERM arrived, still polling
    other = ScriptedWorker(queue_name("own"), tmp_path / "b", lambda n: Script())

    async def scenario(client: Client) -> RunOutcome:
        async with temporal_workers(client, stopping, shared):
            handle = await client.start_workflow(
                RunWorkflow.run,
                run_input(TASK, shared),
                id=f"assay-test-{uuid.uuid4().hex[:10]}",
                task_queue=shared,
            )
            await wait_for(lambda: bool(refused))  # it alone polled, and refused the open
        async with temporal_workers(client, other, shared):
            return await _result(handle)

    outcome = temporal_env.run(scenario)
    assert (outcome.lost, outcome.status, len(outcome.runs)) == (0, "merged", 1)
    assert stopping.effects == [] and stopping.runs == {}  # it opened nothing
    assert [fx.calls[0].value.run_id for fx in other.effects] == outcome.runs


@pytest.mark.parametrize("how", ["restarted", "silent"])
def test_a_lost_worker_closes_the_run_anywhere_and_the_task_runs_again(
    temporal_env: TemporalEnv, tmp_path: Path, how: str
) -> None:
    shared = queue_name("shared")

    def script(n: int) -> Script:
        if n > 1:
            return Script()
        return Script(forgotten=True) if how == "restarted" else Script(dispatch_hangs=True)

    worker = ScriptedWorker(queue_name("own"), tmp_path, script)
    if how == "silent":
        worker.heartbeat_every = 60.0  # its dispatch never beats: the heartbeat timeout lapses
    run = run_input(TASK, shared, heartbeat=1.0)

    async def scenario(client: Client) -> RunOutcome:
        async with temporal_workers(client, worker, shared):
            return await _run(client, run)

    outcome = temporal_env.run(scenario)
    first, second = outcome.runs
    assert (outcome.lost, outcome.status, outcome.task_status) == (1, "merged", "done")
    ((queue, close),) = worker.closes
    assert queue == close_queue(shared)  # any worker: this one is thought gone
    assert close.run_id == first and close.hold is None
    said = "does not hold run" if how == "restarted" else "heartbeat timeout"
    assert close.reason.startswith("environment error: the worker ") and said in close.reason
    assert close.reason.endswith("the run starts again on another worker")
    assert [fx.calls[0].value.run_id for fx in worker.effects] == [first, second]
    assert _names(worker, 1)[-1] == "record"


def test_lost_workers_in_a_row_stop_the_workflow_after_max_runs(
    temporal_env: TemporalEnv, tmp_path: Path
) -> None:
    shared = queue_name("shared")
    worker = ScriptedWorker(queue_name("own"), tmp_path, lambda n: Script(forgotten=True))
    run = RunInput(TASK, shared, max_runs=2)

    async def scenario(client: Client) -> RunOutcome:
        async with temporal_workers(client, worker, shared):
            return await _run(client, run)

    outcome = temporal_env.run(scenario)
    assert outcome.lost == 2 and len(outcome.runs) == 2 and len(worker.closes) == 2
    assert outcome.note == "stopped after 2 lost worker(s) in a row"


def test_a_lost_run_whose_task_settle_held_is_not_run_again(
    temporal_env: TemporalEnv, tmp_path: Path
) -> None:
    shared = queue_name("shared")
    worker = ScriptedWorker(queue_name("own"), tmp_path, lambda n: Script(forgotten=True))
    worker.runnable_after_close = False

    async def scenario(client: Client) -> RunOutcome:
        async with temporal_workers(client, worker, shared):
            return await _run(client, run_input(TASK, shared))

    outcome = temporal_env.run(scenario)
    assert outcome.lost == 1 and len(outcome.runs) == 1 and not outcome.stopped
    assert outcome.task_status == "held" and "was lost" in outcome.note


def test_a_worker_collects_its_leftovers_once_ready(
    temporal_env: TemporalEnv, tmp_path: Path
) -> None:
    """No one else collects what a worker's runs left on its machine: its gc runs once the
    worker is ready (then on its cadence), in a thread, and a stop waits for it to end."""
    worker = ScriptedWorker(queue_name("own"), tmp_path, lambda n: Script())
    tidied, never = threading.Event(), threading.Event()

    async def scenario(client: Client) -> None:
        stop = asyncio.Event()
        serving = asyncio.create_task(
            run_worker(
                client,
                task_queue=queue_name("shared"),
                activities=worker,  # type: ignore[arg-type]
                max_runs=1,
                stop=stop,
                every=[Cadence(tidied.set, 3600.0), Cadence(never.set, 0)],
            )
        )
        await wait_for(tidied.is_set)
        stop.set()
        await asyncio.wait_for(serving, ENDS_WITHIN)

    temporal_env.run(scenario)
    assert tidied.is_set() and not never.is_set()  # a cadence of 0: never, as in serve
