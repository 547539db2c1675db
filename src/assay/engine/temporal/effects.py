"""TemporalEffects: the graph's effects as activities, called from inside the workflow.

``open`` goes to the shared task queue (any worker with room takes it) and names the worker
queue that holds the run's seats; every later call goes there, with explicit timeouts: a
heartbeat for each (the worker side beats while it works) and a schedule-to-start, so a worker
that died is noticed within those and the run stops as :class:`WorkerLost`. Events cost no
round trip: they ride with the next call (see :class:`Pending`).

Retries are for infrastructure faults only (a connection dropped, a process restarted): an
effect's own fault (:class:`EffectFault`) and a stop are never retried; settle stays the one
retry policy for the task.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    TimeoutError,
)
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from assay.core.payload import HaltNotice
    from assay.engine.effects import (
        CandidateCall,
        EffectFault,
        FaultKind,
        FireCall,
        JudgeCall,
        LandCall,
        OpenRequest,
        RecordCall,
        RunEvent,
        RunHandle,
        RunPlan,
        RunRecorded,
        RunStopped,
        SeatCall,
    )
    from assay.engine.temporal.calls import (
        CandidateIn,
        Dispatched,
        FireIn,
        JudgeIn,
        LandIn,
        Opened,
        Pending,
        PlanIn,
        RecordIn,
        RunInput,
        SeatIn,
    )
    from assay.engine.values import Candidate, JudgeRound, LandOutcome, Validation

# ApplicationError types the activities raise (never retried).
EFFECT_FAULT = "EffectFault"
RUN_NOT_HELD = "RunNotHeld"  # the worker does not hold the run (it restarted): lost
RUN_STOPPED = "RunStopped"
# A worker silent past its heartbeat, or an activity past its start-to-close, is a lost
# worker: retrying it on that worker's queue would only wait for its schedule-to-start too.
TIMED_OUT = ["TemporalTimeout:Heartbeat", "TemporalTimeout:StartToClose"]
NOT_RETRIED = [EFFECT_FAULT, RUN_NOT_HELD, RUN_STOPPED, *TIMED_OUT]

INFRASTRUCTURE_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
    non_retryable_error_types=NOT_RETRIED,
)


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
        self.seen: Dispatched | None = None  # the latest look at fired halts, still current

    @property
    def worker(self) -> str | None:
        return self.handle.worker if self.handle else None

    # -- the effects ---------------------------------------------------------------------------

    async def open(self, call: OpenRequest) -> RunHandle:
        t = self.run.timeouts
        try:
            opened: Opened = await workflow.execute_activity(
                "assay.open",
                call,
                result_type=Opened,
                task_queue=self.run.task_queue,
                start_to_close_timeout=timedelta(seconds=t.short),
                heartbeat_timeout=timedelta(seconds=t.heartbeat),
                retry_policy=INFRASTRUCTURE_RETRY,
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
        except ActivityError as err:
            raise _translated(err, self.run.task_queue) from err
        if opened.handle is None:
            raise NotRunnable(opened.not_runnable or "the task is not runnable")
        self.opened, self.handle = opened, opened.handle
        return opened.handle

    async def preflight(self, plan: RunPlan) -> list[str]:
        if self.opened is not None and self.opened.prepared:
            return list(self.opened.unresolved)  # the worker did it while opening
        result: list[str] = await self._call("assay.preflight", PlanIn(plan, self._pending()))
        return result

    async def arm(self, plan: RunPlan) -> None:
        if self.opened is not None and self.opened.prepared:
            return
        await self._call("assay.arm", PlanIn(plan, self._pending()), result_type=type(None))

    async def dispatch(self, call: SeatCall) -> Candidate:
        coder = call.plan.contract.coder_for_seat(call.seat)
        seconds = float(coder.timeout_seconds or 0) + self.run.timeouts.dispatch_margin
        self.dispatching += 1
        try:
            done: Dispatched = await self._call(
                "assay.dispatch",
                SeatIn(call, self._pending()),
                result_type=Dispatched,
                timeout=seconds,
            )
        finally:
            self.dispatching -= 1
        if self.seen is None or done.seen > self.seen.seen:
            self.seen = done
        return done.candidate

    async def validate(self, call: CandidateCall) -> list[Validation]:
        result: list[Validation] = await self._call(
            "assay.validate",
            CandidateIn(call, self._pending()),
            result_type=list[Validation],
            timeout=self.run.timeouts.validate,
        )
        return result

    async def judge(self, call: JudgeCall) -> JudgeRound:
        result: JudgeRound = await self._call(
            "assay.judge",
            JudgeIn(call, self._pending()),
            result_type=JudgeRound,
            timeout=self.run.timeouts.judge,
        )
        return result

    async def fire(self, call: FireCall) -> None:
        self.seen = None  # what fired changes now
        await self._call("assay.fire", FireIn(call, self._pending()), result_type=type(None))

    async def fired_halts(self, plan: RunPlan) -> list[HaltNotice]:
        seen, self.seen = self.seen, None
        if seen is not None and self.dispatching == 0:
            return list(seen.halts)  # looked at after the wave's last coder ended
        result: list[HaltNotice] = await self._call(
            "assay.fired_halts", PlanIn(plan, self._pending()), result_type=list[HaltNotice]
        )
        return result

    async def land(self, call: LandCall) -> LandOutcome:
        result: LandOutcome = await self._call(
            "assay.land",
            LandIn(call, self._pending()),
            result_type=LandOutcome,
            timeout=self.run.timeouts.land,
        )
        return result

    async def emit(self, event: RunEvent) -> None:
        """Kept for the next call: the worker writes it before that call's own effect."""
        self.pending.append(event)

    async def record(self, call: RecordCall) -> RunRecorded:
        recorded: RunRecorded = await self._call(
            "assay.record", RecordIn(call, self._pending()), result_type=RunRecorded
        )
        return recorded

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

    async def _call(
        self,
        name: str,
        arg: Any,
        *,
        result_type: type | Any = list[str],
        timeout: float | None = None,
    ) -> Any:
        worker = self.worker
        assert worker is not None, "the run is not open"
        t = self.run.timeouts
        try:
            result = await workflow.execute_activity(
                name,
                arg,
                result_type=result_type,
                task_queue=worker,
                start_to_close_timeout=timedelta(seconds=timeout or t.short),
                schedule_to_start_timeout=timedelta(seconds=t.schedule_to_start),
                heartbeat_timeout=timedelta(seconds=t.heartbeat),
                retry_policy=INFRASTRUCTURE_RETRY,
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
        except ActivityError as err:
            raise _translated(err, worker) from err
        self._acknowledge(arg.pending)
        return result


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
