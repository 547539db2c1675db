"""The executor's plumbing without a server: the run gate, the events that ride with calls,
how an activity's failure reaches the graph, and every value through the data converter."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import RetryState
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    TimeoutError,
    TimeoutType,
)

from assay.core.contract import Contract
from assay.engine.effects import EffectFault, FaultKind, RunEvent, RunHandle, RunPlan
from assay.engine.temporal.calls import (
    CloseIn,
    Dispatched,
    Opened,
    Pending,
    RunInput,
    RunOutcome,
    Sent,
    StopRequest,
)
from assay.engine.temporal.config import Timeouts, own_queue, workflow_id
from assay.engine.temporal.effects import (
    EFFECT_FAULT,
    RUN_NOT_HELD,
    TemporalEffects,
    WorkerLost,
    _translated,
)
from assay.engine.temporal.worker import RunGate
from assay.engine.values import Candidate, DispatchSummary


def _plan() -> RunPlan:
    contract = Contract.model_validate({"task": "t", "coder": {"kind": "command", "command": "x"}})
    return RunPlan("t1", "r1", "r1", contract, Path("/repo"), "abc", "main")


def _activity_error(cause: BaseException) -> ActivityError:
    err = ActivityError(
        "activity failed",
        scheduled_event_id=1,
        started_event_id=2,
        identity="w",
        activity_type="assay.dispatch",
        activity_id="1",
        retry_state=RetryState.RETRY_STATE_NON_RETRYABLE_FAILURE,
    )
    err.__cause__ = cause
    return err


def test_the_gate_lets_a_worker_take_runs_only_while_it_has_room() -> None:
    held: list[str] = []
    gate = RunGate(2, lambda: len(held))

    async def scenario() -> None:
        first = await gate.reserve_slot(None)  # type: ignore[arg-type]
        held.append("r1")  # the open took its run; its slot is still reserved
        waiting = asyncio.create_task(gate.reserve_slot(None))  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        assert not waiting.done()  # 1 run + 1 slot: no room for a third poll
        gate.release_slot(None)  # type: ignore[arg-type]
        await asyncio.wait_for(waiting, 1)  # the open's slot is free: one more poll
        assert gate.try_reserve_slot(None) is None  # type: ignore[arg-type]
        held.clear()
        gate.changed()  # the run was let go
        assert gate.try_reserve_slot(None) is not None  # type: ignore[arg-type]
        del first

    asyncio.run(scenario())


def test_the_gate_of_a_stopping_worker_starts_no_poll() -> None:
    stopping = [False]
    gate = RunGate(2, lambda: 0, lambda: stopping[0])
    assert gate.try_reserve_slot(None) is not None  # type: ignore[arg-type]
    stopping[0] = True
    assert gate.try_reserve_slot(None) is None  # type: ignore[arg-type]


def test_events_ride_with_calls_and_each_is_acknowledged_once() -> None:
    fx = TemporalEffects(RunInput(task_id="t1", task_queue="q"))
    asyncio.run(fx.emit(RunEvent("attempt.started", {"attempt": 1})))
    asyncio.run(fx.emit(RunEvent("dispatch.started", {"seat": 1})))
    sent_one = fx._pending()
    sent_two = fx._pending()  # two seats in flight carry the same events
    assert (sent_one.first, len(sent_one.events)) == (1, 2)
    asyncio.run(fx.emit(RunEvent("seat.finished", {"seat": 1})))
    fx._acknowledge(sent_one)
    fx._acknowledge(sent_two)  # written once already: nothing more is dropped
    assert [e.kind for e in fx.pending] == ["seat.finished"] and fx.first == 3
    assert fx._pending().first == 3


def test_an_activity_failure_reaches_the_graph_as_it_means() -> None:
    for kind in (TimeoutType.HEARTBEAT, TimeoutType.SCHEDULE_TO_START):
        lost = _translated(
            _activity_error(TimeoutError("t", type=kind, last_heartbeat_details=[])), "q1"
        )
        assert isinstance(lost, WorkerLost) and lost.worker == "q1"
    assert isinstance(_translated(_activity_error(CancelledError("shut down")), "q1"), WorkerLost)
    held = ApplicationError("not here", type=RUN_NOT_HELD)
    assert isinstance(_translated(_activity_error(held), "q1"), WorkerLost)
    fault = ApplicationError("disk full", "environment", "trace", type=EFFECT_FAULT)
    translated = _translated(_activity_error(fault), "q1")
    assert isinstance(translated, EffectFault)
    assert (translated.kind, translated.reason, translated.trace) == (
        FaultKind.ENVIRONMENT,
        "disk full",
        "trace",
    )
    bug = _translated(_activity_error(ApplicationError("boom", type="KeyError")), "q1")
    assert isinstance(bug, EffectFault) and bug.kind is FaultKind.INTERNAL
    assert "KeyError" in bug.reason


def test_names_a_workflow_and_a_worker_queue() -> None:
    assert workflow_id("t1") == "assay-t1"
    mine, again = own_queue("assay"), own_queue("assay")
    assert mine.startswith("assay-") and mine != again  # one queue per worker process


@pytest.mark.parametrize(
    "value",
    [
        RunInput("t1", "assay", timeouts=Timeouts(heartbeat=2.0)),
        StopRequest("cancelled by an operator"),
        CloseIn("t1", "r1", "lost", hold="held", contract=_plan().contract),
        Opened(
            RunHandle(_plan(), "assay-w", datetime(2026, 1, 1, tzinfo=UTC)),
            ["src/x.py"],
            prepared=True,
        ),
        Opened(None, not_runnable="task t1 is held"),
        Sent(_plan(), Pending(3, [RunEvent("attempt.started", {"attempt": 1}, "r1")])),
        Dispatched(Candidate(1, 1, "command", DispatchSummary(exit_code=0)), [], 2),
        RunOutcome("t1", ["r1", "r2"], "ready", "done", lost=1),
    ],
)
def test_every_call_round_trips_through_the_data_converter(value: object) -> None:
    converter = pydantic_data_converter.payload_converter
    [payload] = converter.to_payloads([value])
    # A call sent to a run's worker is typed by what it carries (as its activity declares it).
    hint = Sent[type(value.call)] if isinstance(value, Sent) else type(value)  # type: ignore[misc]
    [back] = converter.from_payloads([payload], [hint])
    assert back == value
