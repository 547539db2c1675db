"""The effect table: every activity of the Temporal executor, in one place.

Each :class:`Effect` names an activity, what the workflow sends it, what it returns, its
start-to-close timeout and the queue it goes to. The graph's effects take their name, call
type and result type from the :class:`~assay.engine.effects.Effects` protocol itself (as
pydantic-ai builds its activities from the object it wraps); the table adds only what Temporal
needs. From it are made both sides: the workflow's calls (:mod:`.effects`) and the worker's
activities (:func:`activity_of`), so adding an effect is one line here (plus its method on the
protocol and its implementation in the local executor).
"""

from __future__ import annotations

import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar, overload

from temporalio import activity

from assay.engine.effects import Effects, RunPlan, SeatCall
from assay.engine.temporal.calls import Closed, CloseIn, Dispatched, Opened, Sent
from assay.engine.temporal.config import Timeouts

C = TypeVar("C")
R = TypeVar("R")
W = TypeVar("W")

PREFIX = "assay."  # an activity's name is the effect's, under this prefix


class Queue(StrEnum):
    SHARED = (
        "shared"  # any worker with room takes it: ``open`` (the worker it lands on keeps the run)
    )
    RUN = "run"  # the run's own worker, which holds its seats: every later call


def _short(t: Timeouts, _call: object) -> float:
    return t.short


def _dispatch(t: Timeouts, call: SeatCall) -> float:
    coder = call.plan.contract.coder_for_seat(call.seat)
    return float(coder.timeout_seconds or 0) + t.dispatch_margin


@dataclass(frozen=True)
class Effect(Generic[C, R]):
    """One activity. ``events``: the call carries the run's pending events (:class:`Sent`);
    calls made before a run is open (``open``) or after its graph gave up on it (``close``)
    carry none."""

    name: str
    call: Any  # a type hint: the converter builds the call from it on the worker
    result: Any  # a type hint: the converter builds the result from it in the workflow
    timeout: Callable[[Timeouts, C], float] = _short
    queue: Queue = Queue.RUN
    events: bool = True

    @property
    def activity(self) -> str:
        return PREFIX + self.name

    @property
    def sent(self) -> Any:
        """What the activity takes: the call itself, or it with the pending events."""
        return Sent[self.call] if self.events else self.call  # type: ignore[name-defined]


@overload
def of(
    method: Callable[[Effects, C], Awaitable[R]],
    *,
    timeout: Callable[[Timeouts, C], float] = ...,
    queue: Queue = ...,
    events: bool = ...,
) -> Effect[C, R]: ...


@overload
def of(
    method: Callable[[Effects, C], Awaitable[Any]],
    *,
    result: type[W],
    timeout: Callable[[Timeouts, C], float] = ...,
    queue: Queue = ...,
    events: bool = ...,
) -> Effect[C, W]: ...


def of(
    method: Callable[[Effects, Any], Awaitable[Any]],
    *,
    result: Any = None,
    timeout: Callable[[Timeouts, Any], float] = _short,
    queue: Queue = Queue.RUN,
    events: bool = True,
) -> Effect[Any, Any]:
    """The effect of an :class:`Effects` method: its name, its call's type and its result's
    from the protocol; ``result`` when the worker answers with more than the method returns."""
    hints = typing.get_type_hints(method)
    (call,) = (hint for name, hint in hints.items() if name != "return")
    answer = hints["return"] if result is None else result
    return Effect(method.__name__, call, answer, timeout, queue, events)


def _validate(t: Timeouts, _call: object) -> float:
    return t.validate


def _judge(t: Timeouts, _call: object) -> float:
    return t.judge


def _land(t: Timeouts, _call: object) -> float:
    return t.land


# ``open`` answers the handle with the worker's first look at the anchors and the halts armed
# (two round trips saved); ``dispatch`` answers the candidate with the run's fired halts as
# the worker saw them when its coder ended (the wave's ``fired_halts`` then needs no call).
OPEN = of(Effects.open, result=Opened, queue=Queue.SHARED, events=False)
PREFLIGHT = of(Effects.preflight)
ARM = of(Effects.arm)
DISPATCH = of(Effects.dispatch, result=Dispatched, timeout=_dispatch)
VALIDATE = of(Effects.validate, timeout=_validate)
JUDGE = of(Effects.judge, timeout=_judge)
FIRE = of(Effects.fire)
FIRED_HALTS = of(Effects.fired_halts)
LAND = of(Effects.land, timeout=_land)
RECORD = of(Effects.record)
# Not the graph's: the workflow closes a run its graph never recorded (lost, or stopped).
CLOSE: Effect[CloseIn, Closed] = Effect("close", CloseIn, Closed, events=False)

EFFECTS: tuple[Effect[Any, Any], ...] = (
    OPEN,
    PREFLIGHT,
    ARM,
    DISPATCH,
    VALIDATE,
    JUDGE,
    FIRE,
    FIRED_HALTS,
    LAND,
    RECORD,
    CLOSE,
)
# Effects that are never an activity: an event rides with the next call instead.
RIDING = frozenset({"emit"})

Handler = Callable[[Effect[Any, Any], Any], Awaitable[Any]]


def activity_of(effect: Effect[Any, Any], handle: Handler) -> Callable[..., Any]:
    """``effect`` as an activity performed by ``handle(effect, arg)``: registered under the
    effect's name, its argument and result typed from the table (the converter reads them)."""

    async def perform(arg: Any) -> Any:
        return await handle(effect, arg)

    perform.__annotations__ = {"arg": effect.sent, "return": effect.result}
    perform.__name__ = perform.__qualname__ = effect.name
    return activity.defn(name=effect.activity)(perform)


def activities_on(queue: Queue, handle: Handler) -> list[Callable[..., Any]]:
    """The activities a worker polls ``queue`` for (``close`` is on the run's worker too: it
    stops that run's coders there)."""
    return [activity_of(e, handle) for e in EFFECTS if e.queue is queue]


def plan_of(call: Any) -> RunPlan:
    """The run a call is for (every call of the run's worker names it)."""
    if isinstance(call, RunPlan):
        return call
    plan: RunPlan = call.handle.plan if hasattr(call, "handle") else call.plan
    return plan


__all__ = [
    "CLOSE",
    "EFFECTS",
    "Effect",
    "Handler",
    "Queue",
    "activities_on",
    "activity_of",
    "plan_of",
]
