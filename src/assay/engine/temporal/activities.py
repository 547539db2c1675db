"""The activities: a worker performing the effects of the runs it holds.

One :class:`Activities` per worker process. ``open`` (polled on the shared queue) builds the
local executor's effects for the run, claims the task, prepares the seats here and keeps them
by run id: that is the affinity. Every later activity of the run arrives on this worker's own
queue and is performed by those same effects. Each activity heartbeats while it works (a
dispatch says its seat and how long it has run), so a worker that dies is noticed within the
heartbeat timeout; a cancelled dispatch stops its coders' process groups (the seat is reset by
the next dispatch). ``close`` closes a run its graph never recorded, once, from the ledger's
journal (:func:`assay.engine.recovery.close.close_unfinished`: the one close recovery uses).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from assay.adapters.assay_secrets import contract_leak
from assay.adapters.process_groups import GROUPS_FILE, recording_groups, stop_recorded_groups
from assay.adapters.store.sql import Ledger, LedgerConflict, RunNotFound
from assay.core.contract import Contract
from assay.core.payload import HaltNotice
from assay.core.tasks import RUNNABLE_STATUSES, Task
from assay.engine.admission import Unrunnable, admit
from assay.engine.effects import (
    EffectFault,
    Effects,
    OpenRequest,
    RunHandle,
    RunRecorded,
    RunStopped,
)
from assay.engine.recovery.close import close_unfinished
from assay.engine.temporal.calls import (
    CandidateIn,
    Closed,
    CloseIn,
    Dispatched,
    FireIn,
    JudgeIn,
    LandIn,
    Opened,
    Pending,
    PlanIn,
    RecordIn,
    SeatIn,
)
from assay.engine.temporal.effects import EFFECT_FAULT, RUN_NOT_HELD, RUN_STOPPED
from assay.engine.values import JudgeRound, LandOutcome, Validation

T = TypeVar("T")
Clock = Callable[[], datetime]


class RunEffects(Effects, Protocol):
    """The local executor's effects, as a worker holds them for one run."""

    def run_dir(self, plan: Any) -> Path: ...

    def close(self) -> None: ...


EffectsFor = Callable[[Task, Contract], RunEffects]


@dataclass
class Held:
    """A run this worker holds: its effects and how far its events are written."""

    fx: RunEffects
    handle: RunHandle
    written: int = 0  # the run's events up to this number are in the ledger
    looks: int = 0  # looks at its fired halts taken after a dispatch
    opened: Opened | None = None  # what open answered (a retried open answers it again)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def groups(self) -> Path:
        return self.fx.run_dir(self.handle.plan) / GROUPS_FILE


def utc_now() -> datetime:
    return datetime.now(UTC)


class Activities:
    """The activities of one worker; ``queue`` is its own task queue."""

    def __init__(
        self,
        *,
        queue: str,
        repo: Path,
        home: Path,
        ledger: Ledger,
        effects_for: EffectsFor,
        contract_for: Callable[[str], Contract],
        max_dispatches: int = 4,
        heartbeat_every: float = 2.0,
        env: Mapping[str, str] | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self.queue = queue
        self.repo = repo
        self.home = home
        self.ledger = ledger
        self.effects_for = effects_for
        self.contract_for = contract_for
        self.env = env
        self.clock = clock
        self.heartbeat_every = heartbeat_every
        self.runs: dict[str, Held] = {}
        self.coders = asyncio.Semaphore(max_dispatches)
        self.changed: Callable[[], None] = lambda: None  # told when a run is let go

    def on_shared_queue(self) -> list[Callable[..., Any]]:
        return [self.open]

    def on_own_queue(self) -> list[Callable[..., Any]]:
        return [
            self.preflight,
            self.arm,
            self.dispatch,
            self.validate,
            self.judge,
            self.fire,
            self.fired_halts,
            self.land,
            self.record,
            self.close,
        ]

    # -- the run's life ----------------------------------------------------------------------

    @activity.defn(name="assay.open")
    async def open(self, call: OpenRequest) -> Opened:
        async with self._beating(lambda: {"opening": call.run_id}):
            held = self.runs.get(call.run_id)
            if held is not None and held.opened is not None:  # retried, reached this worker
                return held.opened
            try:
                record = await asyncio.to_thread(self.ledger.get_run, call.run_id)
            except RunNotFound:
                record = None
            if record is not None:  # an earlier try opened it on a worker that died since
                raise ApplicationError(
                    f"run {call.run_id} was opened by a worker lost since",
                    type=RUN_NOT_HELD,
                    non_retryable=True,
                )
            task = await asyncio.to_thread(self.ledger.get_task, call.task_id)
            if not task.runnable(self.clock()):
                why = f"task {task.id} is {task.status.value}, not runnable"
                return Opened(None, not_runnable=why)
            try:
                contract = await asyncio.to_thread(self.contract_for, task.id)
            except Exception as exc:  # unreadable or missing: nothing can run it
                why = f"task {task.id}: its contract cannot be read: {exc}"
                return Opened(None, not_runnable=why)
            leak = contract_leak(contract, os.environ if self.env is None else self.env)
            if leak is not None:  # as `assay run` refuses it: nothing of it starts here
                why = f"task {task.id}: the contract cannot run: {leak}"
                return Opened(None, not_runnable=why)
            try:  # a program or key this worker lacks: held, as `assay serve` holds it
                await asyncio.to_thread(
                    admit,
                    ledger=self.ledger,
                    task=task,
                    contract=contract,
                    repo=self.repo,
                    home=self.home,
                    now=self.clock(),
                    env=self.env,
                )
            except Unrunnable as held:
                return Opened(None, not_runnable=f"task {task.id} is held: {held}")
            except LedgerConflict as exc:  # another worker claimed (or held) it first
                return Opened(None, not_runnable=str(exc))
            fx = self.effects_for(task, contract)
            try:
                handle = await _faults(fx.open(call))
            except LedgerConflict as exc:  # another run claimed it first
                fx.close()
                return Opened(None, not_runnable=str(exc))
            handle = dataclasses.replace(handle, worker=self.queue)
            held = Held(fx, handle)
            self.runs[call.run_id] = held
            # Preflight and arm here and now: two round trips fewer. If either fails, the
            # graph's own calls repeat it and meet the failure where the graph handles it.
            try:
                with recording_groups(held.groups):
                    unresolved = await fx.preflight(handle.plan)
                    await fx.arm(handle.plan)
            except Exception:
                held.opened = Opened(handle, prepared=False)
            else:
                held.opened = Opened(handle, unresolved=unresolved, prepared=True)
            return held.opened

    @activity.defn(name="assay.record")
    async def record(self, arg: RecordIn) -> RunRecorded:
        plan = arg.call.handle.plan
        try:
            return await self._on_run(plan.run_id, arg.pending, lambda fx: fx.record(arg.call))
        except ApplicationError:
            raise
        except LedgerConflict as exc:  # closed meanwhile (its worker was thought lost)
            raise ApplicationError(str(exc), type=RUN_STOPPED, non_retryable=True) from exc
        finally:
            self._let_go(plan.run_id)

    @activity.defn(name="assay.close")
    async def close(self, call: CloseIn) -> Closed:
        """Close ``call.run_id`` if it is still open (once: a closed run is never closed again)
        and hold the task if asked; here, the run's coders are stopped and its seats removed."""
        async with self._beating(lambda: {"closing": call.run_id}):
            held = self.runs.get(call.run_id) if call.run_id else None
            if held is not None:
                await asyncio.to_thread(stop_recorded_groups, held.groups)
                self._let_go(held.handle.plan.run_id)
            return await asyncio.to_thread(self._close, call)

    def _close(self, call: CloseIn) -> Closed:
        status: str | None = None
        closed_now = False
        if call.run_id is not None:
            try:
                record = self.ledger.get_run(call.run_id)
            except RunNotFound:
                record = None
            if record is not None and record.open:
                contract = call.contract or self.contract_for(call.task_id)
                try:
                    found = close_unfinished(
                        repo=self.repo,
                        home=self.home,
                        ledger=self.ledger,
                        record=record,
                        contract=contract,
                        reason=call.reason,
                        clock=self.clock,
                        env=self.env,
                        # a seat it cannot remove stays for `assay gc`, said in the worker's log
                        warn=activity.logger.warning,
                    )
                    status, closed_now = found.value, True
                except LedgerConflict:  # its own record, or another close, came first
                    record = self.ledger.get_run(call.run_id)
            if record is not None and not closed_now:
                status = record.status.value
        task = self.ledger.get_task(call.task_id)
        if call.hold is not None and task.status in RUNNABLE_STATUSES:
            task.hold(call.hold, self.clock())
            self.ledger.save_task(task)
        return Closed(
            run_id=call.run_id,
            status=status,
            closed_now=closed_now,
            task=task,
            runnable=task.runnable(self.clock()),
        )

    # -- the effects -------------------------------------------------------------------------

    @activity.defn(name="assay.preflight")
    async def preflight(self, arg: PlanIn) -> list[str]:
        return await self._on_run(arg.plan.run_id, arg.pending, lambda fx: fx.preflight(arg.plan))

    @activity.defn(name="assay.arm")
    async def arm(self, arg: PlanIn) -> None:
        await self._on_run(arg.plan.run_id, arg.pending, lambda fx: fx.arm(arg.plan))

    @activity.defn(name="assay.dispatch")
    async def dispatch(self, arg: SeatIn) -> Dispatched:
        call = arg.call
        started = time.monotonic()

        def progress() -> dict[str, Any]:
            elapsed = round(time.monotonic() - started, 1)
            return {"attempt": call.attempt, "seat": call.seat, "elapsed_s": elapsed}

        async def run(fx: RunEffects) -> Dispatched:
            async with self.coders:  # --max-dispatches: coders at once on this worker
                candidate = await fx.dispatch(call)
            held = self.runs[call.plan.run_id]
            async with held.lock:  # this coder has ended: what has fired so far
                halts = await fx.fired_halts(call.plan)
                held.looks += 1
                return Dispatched(candidate, halts, held.looks)

        return await self._on_run(call.plan.run_id, arg.pending, run, progress, stops=True)

    @activity.defn(name="assay.validate")
    async def validate(self, arg: CandidateIn) -> list[Validation]:
        plan = arg.call.plan
        return await self._on_run(plan.run_id, arg.pending, lambda fx: fx.validate(arg.call))

    @activity.defn(name="assay.judge")
    async def judge(self, arg: JudgeIn) -> JudgeRound:
        plan = arg.call.plan
        return await self._on_run(plan.run_id, arg.pending, lambda fx: fx.judge(arg.call))

    @activity.defn(name="assay.fire")
    async def fire(self, arg: FireIn) -> None:
        await self._on_run(arg.call.plan.run_id, arg.pending, lambda fx: fx.fire(arg.call))

    @activity.defn(name="assay.fired_halts")
    async def fired_halts(self, arg: PlanIn) -> list[HaltNotice]:
        plan = arg.plan
        return await self._on_run(plan.run_id, arg.pending, lambda fx: fx.fired_halts(plan))

    @activity.defn(name="assay.land")
    async def land(self, arg: LandIn) -> LandOutcome:
        plan = arg.call.plan
        return await self._on_run(plan.run_id, arg.pending, lambda fx: fx.land(arg.call))

    # -- plumbing ----------------------------------------------------------------------------

    async def _on_run(
        self,
        run_id: str,
        pending: Pending,
        effect: Callable[[RunEffects], Awaitable[T]],
        progress: Callable[[], dict[str, Any]] | None = None,
        *,
        stops: bool = False,
    ) -> T:
        """Perform ``effect`` with the run's effects: its pending events first, heartbeats
        throughout; an effect's fault crosses as a non-retryable error the workflow reads."""
        held = self.runs.get(run_id)
        if held is None:
            raise ApplicationError(
                f"this worker ({self.queue}) does not hold run {run_id}",
                type=RUN_NOT_HELD,
                non_retryable=True,
            )
        async with self._beating(progress or (lambda: {"run": run_id})):
            with recording_groups(held.groups):
                try:
                    await self._write(held, pending)
                    return await _faults(effect(held.fx))
                except asyncio.CancelledError:
                    if stops:  # the coders run on in their own groups: end them
                        await asyncio.shield(asyncio.to_thread(stop_recorded_groups, held.groups))
                    raise

    async def _write(self, held: Held, pending: Pending) -> None:
        """Write the events this worker has not written yet, each number once."""
        async with held.lock:
            for number, event in enumerate(pending.events, start=pending.first):
                if number > held.written:
                    await held.fx.emit(event)
                    held.written = number

    async def sweep(self) -> list[str]:
        """Let go of runs held here that the ledger has closed meanwhile (their workflow closed
        them elsewhere: stopped while its open was in flight, or this worker thought lost),
        so they no longer count against the runs this worker may hold."""
        gone = []
        for run_id, held in list(self.runs.items()):
            try:
                record = await asyncio.to_thread(self.ledger.get_run, run_id)
            except RunNotFound:
                continue
            if not record.open:
                await asyncio.to_thread(stop_recorded_groups, held.groups)
                self._let_go(run_id)
                gone.append(run_id)
        return gone

    def _let_go(self, run_id: str) -> None:
        held = self.runs.pop(run_id, None)
        if held is not None:
            held.fx.close()
            self.changed()

    @contextlib.asynccontextmanager
    async def _beating(self, details: Callable[[], dict[str, Any]]) -> AsyncIterator[None]:
        """Heartbeat every few seconds while the activity works. The first beat waits that
        long too: most calls end sooner, and a beat is a request to the server."""

        async def beat() -> None:
            while True:
                await asyncio.sleep(self.heartbeat_every)
                activity.heartbeat(details())

        beating = asyncio.create_task(beat())
        try:
            yield
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating


async def _faults(effect: Awaitable[T]) -> T:
    """An effect's own fault and a stop cross to the workflow by name, never retried."""
    try:
        return await effect
    except EffectFault as fault:
        raise ApplicationError(
            fault.reason,
            fault.kind.value,
            fault.trace or traceback.format_exc(),
            type=EFFECT_FAULT,
            non_retryable=True,
        ) from fault
    except RunStopped as stop:
        raise ApplicationError(str(stop), type=RUN_STOPPED, non_retryable=True) from stop
