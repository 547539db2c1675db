"""A worker's SIGTERM: the first drains (when a drain has time), a second stops at once; a
drain's time is a duration, refused with exit 2 when it is none."""

from __future__ import annotations

import asyncio
import signal
from types import SimpleNamespace
from typing import cast

import pytest
import typer

from assay.adapters import process
from assay.cli.worker import Drain, _drain_seconds, watch_drain
from assay.engine.effects import OpenRequest
from assay.engine.temporal.calls import Closed, CloseIn, Opened
from assay.engine.temporal.holding import Held, RunsHeld
from assay.engine.temporal.table import OPEN


def test_the_first_sigterm_drains_a_second_stops_at_once() -> None:
    drain = Drain(60.0)
    said = drain(signal.SIGTERM)
    assert said is not None and said.startswith("draining") and drain.signum == signal.SIGTERM
    assert not drain(signal.SIGTERM)  # the second: the graceful stop, now


def test_no_drain_time_stops_at_once() -> None:
    drain = Drain(0.0)
    assert not drain(signal.SIGTERM) and drain.signum is None


def test_the_drain_time_is_a_duration() -> None:
    assert _drain_seconds("90s") == 90.0 and _drain_seconds("0") == 0.0
    with pytest.raises(typer.Exit) as refused:
        _drain_seconds("soon")
    assert refused.value.exit_code == 2


@pytest.fixture
def no_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process not asked to stop, whatever a test asks of it."""
    monkeypatch.setattr(process, "_stop", [])


class Opening(RunsHeld):
    """A worker whose open waits for ``let`` before it holds its run."""

    def __init__(self) -> None:
        super().__init__(queue="w1")
        self.let = asyncio.Event()

    async def open(self, call: OpenRequest) -> Opened:
        await self.let.wait()
        self.runs[call.run_id] = cast(Held, object())
        return cast(Opened, None)

    async def close(self, call: CloseIn) -> Closed:
        raise NotImplementedError


@pytest.mark.usefixtures("no_stop")
def test_a_drain_waits_for_the_run_an_open_in_flight_holds() -> None:
    """An open that began before the SIGTERM holds its run after it: the worker stops polling
    only once that run, too, has ended (never stranding it with no one to take its calls)."""
    worker, drain = Opening(), Drain(60.0)

    async def scenario() -> None:
        stop = asyncio.Event()
        request = cast(OpenRequest, SimpleNamespace(run_id="r1"))
        opening = asyncio.create_task(worker.perform(OPEN, request))
        await asyncio.sleep(0)  # the open has begun: not yet held
        assert worker.busy and not worker.runs
        drain(signal.SIGTERM)
        watching = asyncio.create_task(watch_drain(drain, lambda: worker.busy, stop, tick=0.01))
        await asyncio.sleep(0.05)
        assert not stop.is_set()  # the open is in flight
        worker.let.set()
        await opening
        await asyncio.sleep(0.05)
        assert not stop.is_set() and worker.busy  # its run is held: it goes on to its end
        worker.runs.clear()
        await asyncio.wait_for(watching, 1)
        assert stop.is_set() and process.stop_requested() is None  # drained, nothing stopped

    asyncio.run(scenario())


@pytest.mark.usefixtures("no_stop")
def test_a_drain_out_of_time_stops_what_is_left() -> None:
    drain = Drain(0.05)
    drain(signal.SIGTERM)

    async def scenario() -> None:
        stop = asyncio.Event()
        await asyncio.wait_for(watch_drain(drain, lambda: True, stop, tick=0.01), 1)
        assert stop.is_set()

    asyncio.run(scenario())
    assert process.stop_requested() == signal.SIGTERM  # the coders stopped, the runs go


@pytest.mark.usefixtures("no_stop")
def test_sigint_during_a_drain_stops_at_once() -> None:
    drain = Drain(60.0)
    drain(signal.SIGTERM)

    async def scenario() -> None:
        stop = asyncio.Event()
        watching = asyncio.create_task(watch_drain(drain, lambda: True, stop, tick=0.01))
        await asyncio.sleep(0.03)
        assert not stop.is_set()
        process.request_stop(signal.SIGINT, grace=0)
        await asyncio.wait_for(watching, 1)
        assert stop.is_set()

    asyncio.run(scenario())
    assert process.stop_requested() == signal.SIGINT
