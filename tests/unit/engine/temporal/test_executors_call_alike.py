"""Both executors ask the same of the world: the same effect calls, with the same values, in
the same order, and the same events.

One scripted run goes through the local executor (``run_graph`` calling its effects
in-process, as ``assay run`` does) and through the Temporal one (the workflow in Temporal's
test environment, the table's activities, a worker holding the run); each records every call
its effects were made. What differs by design is set aside, no more: Temporal writes the
events with the next call (so they are compared as a sequence of their own), names the
worker that holds the run in its handle, and a dispatch looks at the fired halts as its coder
ends (with several seats, that look replaces the graph's one look per wave, and concurrent
seats finish in any order).
"""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from pathlib import Path
from typing import Any

import pytest
from support.scripted_effects import (
    Called,
    Script,
    ScriptedEffects,
    ScriptedWorker,
    TemporalEnv,
    queue_name,
    run_input,
    temporal_workers,
)
from temporalio.client import Client

from assay.core.vocab import CanonicalHalt, Severity
from assay.engine.effects import OpenRequest, RecordCall, RunRecorded
from assay.engine.graph.run import run_graph
from assay.engine.temporal.calls import RunOutcome
from assay.engine.temporal.workflow import RunWorkflow

SCENARIOS = {
    "passes": Script(),
    "blocked_then_passes": Script([Severity.BLOCK, Severity.PASS]),
    "recovery_spent": Script([Severity.BLOCK]),
    "coder_fires_a_block_halt": Script(coder_fires={1: CanonicalHalt.IRREVERSIBLE_ACTION}),
    "judged_seats": Script(seats=3, judges=3),
    "seats_blocked_then_pass": Script([Severity.BLOCK, Severity.PASS], seats=2),
}


def _through_temporal(env: TemporalEnv, script: Script, home: Path) -> ScriptedEffects:
    shared = queue_name("shared")
    worker = ScriptedWorker(queue_name("own"), home, lambda n: script)

    async def scenario(client: Client) -> RunOutcome:
        async with temporal_workers(client, worker, shared):
            return await client.execute_workflow(
                RunWorkflow.run,
                run_input("t1", shared),
                id=f"assay-test-{uuid.uuid4().hex[:10]}",
                task_queue=shared,
            )

    outcome = env.run(scenario)
    (fx,) = worker.effects
    assert outcome.runs == [fx.calls[0].value.run_id], outcome
    return fx


def _locally(env: TemporalEnv, script: Script, home: Path, run_id: str) -> ScriptedEffects:
    fx = ScriptedEffects(script, home)
    recorded = env.loop.run_until_complete(run_graph(OpenRequest("t1", run_id), fx))
    assert isinstance(recorded, RunRecorded)
    return fx


def _effects(fx: ScriptedEffects, *, seats: int) -> list[Called]:
    """The calls other than events, the holding worker's name set aside; with several seats,
    the looks at fired halts dropped and each run of concurrent calls in seat order."""
    calls = []
    for call in fx.calls:
        if call.name == "emit" or (seats > 1 and call.name == "fired_halts"):
            continue
        value = call.value
        if isinstance(value, RecordCall):
            handle = dataclasses.replace(value.handle, worker="-")
            value = dataclasses.replace(value, handle=handle)
        calls.append(Called(call.name, value))
    if seats == 1:
        return calls
    ordered: list[Called] = []
    for _name, run in itertools.groupby(calls, key=lambda c: c.name):
        ordered.extend(sorted(run, key=lambda c: repr(c.value)))
    return ordered


def _events(fx: ScriptedEffects) -> list[Any]:
    return [c.value for c in fx.calls if c.name == "emit"]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_both_executors_make_the_same_calls_of_the_world(
    temporal_env: TemporalEnv, tmp_path: Path, name: str
) -> None:
    script = SCENARIOS[name]
    remote = _through_temporal(temporal_env, script, tmp_path / "temporal")
    local = _locally(temporal_env, script, tmp_path / "local", remote.calls[0].value.run_id)

    made = _effects(local, seats=script.seats)
    assert [c.name for c in made][-1] == "record" and len(made) > 4
    assert _effects(remote, seats=script.seats) == made
    assert _events(remote) == _events(local)
    if script.seats == 1:  # nothing concurrent: even the looks at fired halts are the same
        assert [c.name for c in remote.calls if c.name != "emit"] == [
            c.name for c in local.calls if c.name != "emit"
        ]


def test_a_run_the_worker_could_not_prepare_is_preflighted_and_armed_by_the_graph(
    temporal_env: TemporalEnv, tmp_path: Path
) -> None:
    """The worker preflights and arms as it opens a run; when that fails, the workflow's own
    preflight and arm go to their activities (and then the calls are the local executor's)."""
    remote = _through_temporal(temporal_env, Script(arm_fails_once=True), tmp_path / "temporal")
    local = _locally(temporal_env, Script(), tmp_path / "local", remote.calls[0].value.run_id)
    made = _effects(remote, seats=1)
    assert [c.name for c in made[:5]] == ["open", "preflight", "arm", "preflight", "arm"]
    assert made[3:] == _effects(local, seats=1)[1:]
