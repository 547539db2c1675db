"""TemporalEffects: the graph's effects as activities, called from inside the workflow.

``open`` goes to the shared task queue (any worker with room takes it) and names the worker
queue that holds the run's seats; every later call goes there, with explicit timeouts: a
heartbeat for each (the worker side beats while it works) and a schedule-to-start, so a worker
that died is noticed within those and the run stops as :class:`WorkerLost`. Events cost no
round trip: they ride with the next call (see :class:`Pending`). Each call's activity, its
types, its timeout and its queue are the effect table's (:mod:`.table`): a method here exists
only where the workflow does more than pass the call on.

Retries are for infrastructure faults only (a connection dropped, a process restarted): an
effect's own fault (:class:`EffectFault`) and a stop are never retried; settle stays the one
retry policy for the task.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    TimeoutError,
    TimeoutType,
)
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from assay.core.payload import HaltNotice
    from assay.engine.effects import (
        EffectFault,
        FaultKind,
        FireCall,
        OpenRequest,
        RunEvent,
        RunHandle,
        RunPlan,
        RunStopped,
        SeatCall,
    )
    from assay.engine.temporal.calls import Dispatched, Opened, Pending, RunInput, Sent
    from assay.engine.temporal.config import Timeouts
    from assay.engine.temporal.table import (
        ARM,
        DISPATCH,
        FIRE,
        FIRED_HALTS,
        JUDGE,
        LAND,
        OPEN,
        PREFLIGHT,
        RECORD,
        VALIDATE,
        Effect,
        Queue,
    )
    from assay.engine.values import Candidate

C = TypeVar("C")
R = TypeVar("R")

# ApplicationError types the activities raise (never retried).
EFFECT_FAULT = "EffectFault"
RUN_NOT_HELD = "RunNotHeld"  # the worker does not hold the run (it restarted): lost
RUN_STOPPED = "RunStopped"
WORKER_STOPPING = "WorkerStopping"  # a worker asked to stop takes no new run: open it elsewhere
# The shared repository could not be fetched: nothing started; asked again, less and less often.
ORIGIN_UNREACHABLE = "OriginUnreachable"
# A worker silent past its heartbeat, or an activity past its start-to-close, is a lost
# worker: retrying it on that worker's queue would only wait for its schedule-to-start too.
TIMED_OUT = ["TemporalTimeout:Heartbeat", "TemporalTimeout:StartToClose"]
NOT_RETRIED = [
    EFFECT_FAULT, RUN_NOT_HELD, RUN_STOPPED, WORKER_STOPPING, ORIGIN_UNREACHABLE, *TIMED_OUT
]  # fmt: skip
REOPEN_AFTER = timedelta(seconds=1)  # a stopping worker refused the open: ask again
BEAT_AT = "at"  # in a heartbeat's details: the worker's clock (epoch seconds) when it beat
# A heartbeat timeout this late after the last beat fired when the server came back from an
# outage (its timer was due while it was away), not because the worker went silent.
# The SDK sends beats at most every 0.8 timeout, each with the latest details (beaten every
# 2 s): a silent worker's timeout fires within 2 s of that timeout after its last beat.
LATE_BY = 3.0  # seconds beyond the heartbeat timeout
REJOIN_WITHIN = 30.0  # seconds a worker back from the outage has to take the call again
REJOIN_PATCH = "rejoin-after-outage"
REFETCH_AFTER = (timedelta(seconds=5), timedelta(minutes=5))  # first and longest wait

INFRASTRUCTURE_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
    non_retryable_error_types=NOT_RETRIED,
)
UNTIL_DONE = RetryPolicy(  # a lost run's close: the run must not stay open
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=0,
)


async def execute(
    effect: Effect[C, R],
    call: C,
    *,
    queue: str,
    timeouts: Timeouts,
    pending: Pending | None = None,
    until_done: bool = False,
    start_within: float | None = None,
    number: int | None = None,
) -> R:
    """Perform ``effect`` as its activity on ``queue``, with the table's timeout for it. On a
    run's worker queue a schedule-to-start bounds the wait (a live worker takes its own calls
    at once); ``until_done``: retried on any worker until one performs it."""
    own = effect.queue is Queue.RUN and not until_done
    arg = Sent(call, pending or Pending(), number) if effect.events else call
    result: R = await workflow.execute_activity(
        effect.activity,
        arg,
        result_type=effect.result,
        task_queue=queue,
        start_to_close_timeout=timedelta(seconds=effect.timeout(timeouts, call)),
        schedule_to_start_timeout=(
            timedelta(seconds=start_within or timeouts.schedule_to_start) if own else None
        ),
        heartbeat_timeout=timedelta(seconds=timeouts.heartbeat),
        retry_policy=UNTIL_DONE if until_done else INFRASTRUCTURE_RETRY,
        cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    )
    return result


def _performed(effect: Effect[C, R]) -> Callable[[TemporalEffects, C], Coroutine[Any, Any, R]]:
    """An effect the workflow only passes on: its activity on the run's worker."""

    async def method(self: TemporalEffects, call: C) -> R:
        return await self._call(effect, call)

    method.__name__ = effect.name
    return method


class WorkerLost(RunStopped):
    """The worker holding the run's seats stopped answering (or never took the call)."""

    def __init__(self, worker: str, why: str) -> None:
        super().__init__(f"the worker {worker} was lost: {why}")
        self.worker = worker
        self.why = why


class NotRunnable(RunStopped):
    """``open`` found the task not runnable (held, done, claimed by another run)."""


class TemporalEffects:
    """The effects of one run, performed as activities (a fresh one for each run opened)."""

    def __init__(self, run: RunInput) -> None:
        self.run = run
        self.handle: RunHandle | None = None
        self.opened: Opened | None = None
        self.pending: list[RunEvent] = []
        self.first = 1  # the run's number of ``pending[0]``
        self.dispatching = 0
        self.asked = 0  # calls numbered so far (a call asked again keeps its number)
        self.seen: Dispatched | None = None  # the latest look at fired halts, still current

    @property
    def worker(self) -> str | None:
        return self.handle.worker if self.handle else None

    # -- the effects ---------------------------------------------------------------------------

    validate = _performed(VALIDATE)
    judge = _performed(JUDGE)
    land = _performed(LAND)
    record = _performed(RECORD)

    async def open(self, call: OpenRequest) -> RunHandle:
        queue = self.run.opens_on
        wait = REFETCH_AFTER[0]
        while True:
            try:
                opened = await execute(OPEN, call, queue=queue, timeouts=self.run.timeouts)
                break
            except ActivityError as err:
                refused = _refused_as(err)
                if refused == ORIGIN_UNREACHABLE:  # the worker logged why; nothing started
                    await workflow.sleep(wait)
                    wait = min(wait * 2, REFETCH_AFTER[1])
                    continue
                if refused != WORKER_STOPPING:
                    raise _translated(err, queue) from err
            await workflow.sleep(REOPEN_AFTER)  # by then it polls no more; another takes it
        if opened.handle is None:
            raise NotRunnable(opened.not_runnable or "the task is not runnable")
        self.opened, self.handle = opened, opened.handle
        return opened.handle

    async def preflight(self, plan: RunPlan) -> list[str]:
        if self.opened is not None and self.opened.prepared:
            return list(self.opened.unresolved)  # the worker did it while opening
        return await self._call(PREFLIGHT, plan)

    async def arm(self, plan: RunPlan) -> None:
        if self.opened is not None and self.opened.prepared:
            return
        await self._call(ARM, plan)

    async def dispatch(self, call: SeatCall) -> Candidate:
        self.dispatching += 1
        try:
            done = await self._call(DISPATCH, call)
        finally:
            self.dispatching -= 1
        if self.seen is None or done.seen > self.seen.seen:
            self.seen = done
        return done.candidate

    async def fire(self, call: FireCall) -> None:
        self.seen = None  # what fired changes now
        await self._call(FIRE, call)

    async def fired_halts(self, plan: RunPlan) -> list[HaltNotice]:
        seen, self.seen = self.seen, None
        if seen is not None and self.dispatching == 0:
            return list(seen.halts)  # looked at after the wave's last coder ended
        return await self._call(FIRED_HALTS, plan)

    async def emit(self, event: RunEvent) -> None:
        """Kept for the next call: the worker writes it before that call's own effect."""
        self.pending.append(event)

    # -- calls -------------------------------------------------------------------------------

    def _pending(self) -> Pending:
        return Pending(first=self.first, events=list(self.pending))

    def _acknowledge(self, sent: Pending) -> None:
        """Drop what the worker has written (calls in flight together carry the same events,
        and the worker writes each number once)."""
        written = sent.first + len(sent.events) - 1
        drop = max(0, min(len(self.pending), written - self.first + 1))
        del self.pending[:drop]
        self.first += drop

    async def _call(self, effect: Effect[C, R], call: C) -> R:
        """``effect`` on the run's worker, with the events not yet written. A heartbeat timeout
        that fired late (the server was away, not the worker) asks the worker once more: back
        from the outage, it joins the work it kept going; a dead one never takes the call."""
        worker = self.worker
        assert worker is not None, "the run is not open"
        pending = self._pending()
        timeouts = self.run.timeouts
        asked = workflow.now().timestamp()
        self.asked += 1
        number = self.asked
        try:
            result = await execute(
                effect, call, queue=worker, timeouts=timeouts, pending=pending, number=number
            )
        except ActivityError as err:
            late = _timed_out_late(err, timeouts, asked)
            if not (late and workflow.patched(REJOIN_PATCH)):
                raise _translated(err, worker) from err
            try:
                result = await execute(
                    effect, call, queue=worker, timeouts=timeouts, pending=pending,
                    start_within=REJOIN_WITHIN, number=number,
                )  # fmt: skip
            except ActivityError as again:
                raise _translated(again, worker) from again
        self._acknowledge(pending)
        return result


def _timed_out_late(err: ActivityError, timeouts: Timeouts, asked: float) -> bool:
    """A heartbeat timeout further from the last sign of life (the last beat the server kept,
    else the call itself, at ``asked``) than the timeout and a margin: the server fired it
    late, on its return from an outage."""
    cause = err.cause
    if not isinstance(cause, TimeoutError) or cause.type is not TimeoutType.HEARTBEAT:
        return False
    details = list(cause.last_heartbeat_details)
    beat = details[-1] if details else None
    at = beat.get(BEAT_AT) if isinstance(beat, dict) else None
    alive = max(asked, at) if isinstance(at, int | float) else asked
    return workflow.now().timestamp() - alive > timeouts.heartbeat + LATE_BY


def _refused_as(err: ActivityError) -> str | None:
    """The type of an activity's refusal (an ``ApplicationError``), else None."""
    cause = err.cause
    return cause.type if isinstance(cause, ApplicationError) else None


def _translated(err: ActivityError, worker: str) -> Exception:
    """An activity's failure as the graph knows it: a lost worker stops the run; an effect's
    fault is the graph's to turn into a failed result; anything else outlived its retries."""
    cause = err.cause
    if isinstance(cause, TimeoutError):
        return WorkerLost(worker, f"{cause.type.name.lower() if cause.type else 'a'} timeout")
    if isinstance(cause, CancelledError):  # not by the workflow: its worker shut down
        return WorkerLost(worker, f"its activity was cancelled: {cause.message}")
    if isinstance(cause, ApplicationError):
        if cause.type == RUN_NOT_HELD:
            return WorkerLost(worker, cause.message)
        if cause.type == RUN_STOPPED:
            return RunStopped(cause.message)
        if cause.type == EFFECT_FAULT:
            details = list(cause.details)
            kind = FaultKind(details[0]) if details else FaultKind.INTERNAL
            trace = str(details[1]) if len(details) > 1 else ""
            return EffectFault(kind, cause.message, trace)
        return EffectFault(FaultKind.INTERNAL, f"{cause.type or 'error'}: {cause.message}")
    return EffectFault(FaultKind.INTERNAL, str(cause or err))
