"""A call the workflow asks again after a Temporal outage is never performed twice: the
worker joins the work still in flight when the server gave up on its activity, or hands over
the result of one that ended while the server was away (its completion then refused)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from assay.engine.temporal import holding
from assay.engine.temporal.calls import Pending
from assay.engine.temporal.holding import Held, RunsHeld


class _Fx:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def run_dir(self, plan: Any) -> Path:
        return self.folder

    def close(self) -> None:
        pass


class _Runs(RunsHeld):
    async def open(self, call: Any) -> Any:  # pragma: no cover - not used
        raise NotImplementedError

    async def close(self, call: Any) -> Any:  # pragma: no cover - not used
        raise NotImplementedError


def _runs(tmp_path: Path) -> _Runs:
    runs = _Runs(queue="worker-1", heartbeat_every=3600)  # no beat (no activity context)
    handle = SimpleNamespace(plan=SimpleNamespace(run_id="r1"))
    runs.runs["r1"] = Held(_Fx(tmp_path), handle)  # type: ignore[arg-type]
    return runs


KEY = "land:LandCall(plan=…, candidate=Candidate(attempt=1, seat=1, commit='abc'))"


def test_a_call_that_ended_during_the_outage_hands_over_its_result_when_asked_again(
    tmp_path: Path,
) -> None:
    runs = _runs(tmp_path)
    performed: list[int] = []

    async def land(fx: Any) -> str:
        performed.append(1)
        await asyncio.sleep(0.01)
        return f"landed #{len(performed)}"

    async def scenario() -> tuple[str, str]:
        # The server is away: the activity runs to its end; its completion is then refused
        # by the server, which gave up on it (its heartbeat timeout fired late).
        first = await runs._on_run("r1", Pending(), land, key=KEY)
        # The server is back; the workflow sees the late timeout and asks the same worker again.
        again = await runs._on_run("r1", Pending(), land, key=KEY)
        return first, again

    first, again = asyncio.run(scenario())
    assert len(performed) == 1, (
        f"the effect was performed {len(performed)} times: the call asked again after the "
        "outage did not take the result of the one that ended while the server was away"
    )
    assert again == first


def test_a_call_still_in_flight_when_the_server_gave_up_is_joined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = _runs(tmp_path)
    performed: list[int] = []
    monkeypatch.setattr(holding, "_given_up_by_the_server", lambda: True)

    async def land(fx: Any) -> str:
        performed.append(1)
        await asyncio.sleep(0.2)
        return "landed"

    async def scenario() -> str:
        first = asyncio.ensure_future(runs._on_run("r1", Pending(), land, key=KEY))
        await asyncio.sleep(0.05)
        first.cancel()  # the server's give-up reaches the worker
        with pytest.raises(asyncio.CancelledError):
            await first
        return await runs._on_run("r1", Pending(), land, key=KEY)

    assert asyncio.run(scenario()) == "landed"
    assert len(performed) == 1
