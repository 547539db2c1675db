"""serve --temporal's step through a Temporal outage: each call is tried again while the server
does not answer (said once, and its end), within a bound; any other error is not retried."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

from assay.adapters.temporal_connection import TemporalConnection
from assay.core.tasks import Task
from assay.engine.temporal import serving
from assay.engine.temporal.calls import RunOutcome

DOWN = RPCError("tcp connect error", RPCStatusCode.UNAVAILABLE, b"")


class Handle:
    def __init__(self, failures: list[Exception]) -> None:
        self.id = "assay-t1"
        self.failures = failures

    async def result(self) -> RunOutcome:
        if self.failures:
            raise self.failures.pop(0)
        return RunOutcome("t1", status="merged")


def step(
    monkeypatch: pytest.MonkeyPatch, submits: list[Exception], results: list[Exception], **kw: Any
) -> tuple[serving.WorkflowStep, list[str]]:
    async def connect(_connection: TemporalConnection, **_options: object) -> object:
        return object()

    async def submit(*_args: object, **_kw: object) -> Handle:
        if submits:
            raise submits.pop(0)
        return Handle(results)

    monkeypatch.setattr(serving, "connect", connect)
    monkeypatch.setattr(serving, "submit", submit)
    monkeypatch.setattr(serving, "_RETRY_SECONDS", (0.01,))
    said: list[str] = []
    made = serving.WorkflowStep(
        TemporalConnection("127.0.0.1:1", "default"), task_queue="q", on_outage=said.append, **kw
    )
    return made, said


def task() -> Task:
    from datetime import UTC, datetime

    return Task.new(id="t1", title="t", instruction="i", now=datetime.now(UTC))


def test_an_outage_while_submitting_and_waiting_is_waited_out_and_said_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made, said = step(monkeypatch, [DOWN, DOWN], [DOWN, DOWN, DOWN])
    try:
        assert made(task()).status == "merged"
    finally:
        made.close()
    assert made.submitted == 1
    down = said[0]
    assert down.startswith("Temporal does not answer (tcp connect error): trying again")
    assert said == [down, "Temporal answers again", down, "Temporal answers again"]


def test_an_outage_longer_than_the_bound_and_other_errors_are_not_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made, _ = step(monkeypatch, [DOWN] * 1000, [], outage=0.05)
    try:
        with pytest.raises(RPCError):
            made(task())
    finally:
        made.close()
    refused = RPCError("no", RPCStatusCode.PERMISSION_DENIED, b"")
    made, said = step(monkeypatch, [refused], [])
    try:
        with pytest.raises(RPCError):
            made(task())
    finally:
        made.close()
    assert said == []


def test_an_outage_late_in_a_long_wait_is_still_waited_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bound counts from the outage's first failure, not from when the wait began: a
    workflow that ran longer than the bound and then met a blip is still waited for."""
    import asyncio

    class Slow(Handle):
        async def result(self) -> RunOutcome:
            if self.failures:
                await asyncio.sleep(0.2)  # the workflow ran a while before Temporal restarted
                raise self.failures.pop(0)
            return RunOutcome("t1", status="merged")

    made, said = step(monkeypatch, [], [], outage=0.1)
    monkeypatch.setattr(serving, "submit", lambda *_a, **_k: _returns(Slow([DOWN])))
    try:
        assert made(task()).status == "merged"
    finally:
        made.close()
    assert said[-1] == "Temporal answers again"


async def _returns(value: Any) -> Any:
    return value


def test_stopping_during_an_outage_does_not_wait_it_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading
    import time

    made, said = step(monkeypatch, [DOWN] * 100_000, [], outage=300.0)
    monkeypatch.setattr(serving, "_RETRY_SECONDS", (60.0,))
    answers: list[RunOutcome] = []
    waiting = threading.Thread(target=lambda: answers.append(made(task())))
    waiting.start()
    try:
        deadline = time.monotonic() + 5
        while not said and time.monotonic() < deadline:
            time.sleep(0.01)
        assert said, "the outage was never said"
        made.abandon()
        waiting.join(5)
        assert not waiting.is_alive()
    finally:
        made.close()
    assert answers[0].note == "serve stopped waiting; its workflow goes on"


def test_a_second_outage_in_one_long_wait_has_its_own_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two blips during one wait, further apart than the bound: the second is waited out too
    (the wait ran between them: the server answered)."""
    import asyncio

    class Twice(Handle):
        async def result(self) -> RunOutcome:
            if self.failures:
                await asyncio.sleep(0.15)  # waited a while, then the server went away
                raise self.failures.pop(0)
            return RunOutcome("t1", status="merged")

    made, said = step(monkeypatch, [], [], outage=0.1)
    monkeypatch.setattr(serving, "_NEW_OUTAGE_AFTER", 0.1)
    monkeypatch.setattr(serving, "submit", lambda *_a, **_k: _returns(Twice([DOWN, DOWN])))
    try:
        assert made(task()).status == "merged"
    finally:
        made.close()
    assert said.count("Temporal answers again") == 1 and len(said) == 2
