"""The effect table covers the Effects protocol, and both sides are made from it."""

from __future__ import annotations

import inspect
from pathlib import Path

from support.scripted_effects import Script, ScriptedWorker
from temporalio import activity

from assay.engine.effects import Effects
from assay.engine.temporal.effects import TemporalEffects
from assay.engine.temporal.table import CLOSE, EFFECTS, RIDING, Queue


def _protocol_methods() -> set[str]:
    return {
        name
        for name, member in inspect.getmembers(Effects, inspect.isfunction)
        if not name.startswith("_")
    }


def test_every_effect_of_the_protocol_is_an_activity_or_rides_with_one() -> None:
    graphs = {e.name for e in EFFECTS if e is not CLOSE}
    assert graphs | RIDING == _protocol_methods() and not graphs & RIDING
    names = [e.activity for e in EFFECTS]
    assert len(set(names)) == len(names) and all(n.startswith("assay.") for n in names)


def test_the_workflow_calls_each_effect_and_the_worker_serves_it_where_it_is_sent() -> None:
    for effect in EFFECTS:
        if effect is not CLOSE:
            assert inspect.iscoroutinefunction(getattr(TemporalEffects, effect.name))
    worker = ScriptedWorker("own", Path("/nonexistent"), lambda _: Script())
    served = {
        queue: {activity._Definition.must_from_callable(fn).name for fn in worker.on(queue)}
        for queue in Queue
    }
    assert served[Queue.SHARED] == {"assay.open"}
    assert served[Queue.RUN] == {e.activity for e in EFFECTS} - {"assay.open"}
    close = activity._Definition.must_from_callable(worker.closing())
    assert close.name == "assay.close" and close.arg_types == [CLOSE.call]


def test_an_activity_takes_its_call_with_the_events_and_answers_the_tables_result() -> None:
    worker = ScriptedWorker("own", Path("/nonexistent"), lambda _: Script())
    for fn in worker.on(Queue.RUN):
        defined = activity._Definition.must_from_callable(fn)
        effect = next(e for e in EFFECTS if e.activity == defined.name)
        assert defined.arg_types == [effect.sent] and defined.ret_type == effect.result
