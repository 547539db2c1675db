"""The worker's side of the effect table: performing the effects of the runs a worker holds.

:class:`RunsHeld` keeps each run this worker opened by its id, with the local executor's
effects for it: that is the affinity. Every activity of the table is performed by
:meth:`RunsHeld.perform`: an effect of a held run writes the events that rode with it, then
calls the method of the same name on the run's effects, heartbeating throughout (a dispatch
says its seat and how long it has run), so a worker that dies is noticed within the heartbeat
timeout; a cancelled dispatch stops its coders' process groups (the seat is reset by the next
dispatch). Opening a run and closing one its graph never recorded need the ledger: they are
the subclass's (:class:`assay.engine.temporal.activities.Activities`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from assay.adapters.process import stop_requested
from assay.adapters.process_groups import GROUPS_FILE, recording_groups, stop_recorded_groups
from assay.adapters.store.errors import LedgerConflict
from assay.engine.effects import (
    EffectFault,
    Effects,
    OpenRequest,
    RecordCall,
    RunHandle,
    RunRecorded,
    RunStopped,
    SeatCall,
)
from assay.engine.temporal.calls import Closed, CloseIn, Dispatched, Opened, Pending, Sent
from assay.engine.temporal.effects import (
    BEAT_AT,
    EFFECT_FAULT,
    RUN_NOT_HELD,
    RUN_STOPPED,
    WORKER_STOPPING,
)
from assay.engine.temporal.table import (
    CLOSE,
    DISPATCH,
    OPEN,
    RECORD,
    Effect,
    Queue,
    activities_on,
    activity_of,
    plan_of,
)

T = TypeVar("T")


class RunEffects(Effects, Protocol):
    """The local executor's effects, as a worker holds them for one run."""

    def run_dir(self, plan: Any) -> Path: ...

    def close(self) -> None: ...


@dataclass
class Held:
    """A run this worker holds: its effects and how far its events are written."""

    fx: RunEffects
    handle: RunHandle
    written: int = 0  # the run's events up to this number are in the ledger
    looks: int = 0  # looks at its fired halts taken after a dispatch
    opened: Opened | None = None  # what open answered (a retried open answers it again)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Calls in flight (or ended, their activity given up by the server), by what they ask.
    inflight: dict[str, asyncio.Future[Any]] = field(default_factory=dict)

    @property
    def groups(self) -> Path:
        return self.fx.run_dir(self.handle.plan) / GROUPS_FILE


class RunsHeld(ABC):
    """The runs one worker holds; ``queue`` is its own task queue. How a run is opened and
    closed (from a ledger, or scripted) is the subclass's."""

    def __init__(self, *, queue: str, max_dispatches: int = 4, heartbeat_every: float = 2.0):
        self.queue = queue
        self.heartbeat_every = heartbeat_every
        self.runs: dict[str, Held] = {}
        self.coders = asyncio.Semaphore(max_dispatches)
        self.changed: Callable[[], None] = lambda: None  # told when a run is let go
        self.stopping: Callable[[], bool] = lambda: stop_requested() is not None
        self.opening = 0  # opens in flight: each may hold a run once it ends
        self.capacity: int | None = None  # runs it may hold (None: its gates alone bound it)
        self.repository: str | None = None  # the repository it serves (None: only tasks of none)

    @property
    def busy(self) -> bool:
        """Runs held here, or an open in flight that may hold one: what a drain waits for."""
        return bool(self.runs) or self.opening > 0

    # -- the activities ----------------------------------------------------------------------

    def on(self, queue: Queue) -> list[Callable[..., Any]]:
        """The table's activities for ``queue``, performed here."""
        return activities_on(queue, self.perform)

    def closing(self) -> Callable[..., Any]:
        """``close`` alone: what a worker serves on the close queue."""
        return activity_of(CLOSE, self.perform)

    async def perform(self, effect: Effect[Any, Any], arg: Any) -> Any:
        """One activity of the table: the run's life by its own methods, any other effect by
        the held run's method of the same name."""
        own: dict[str, Callable[[Any], Awaitable[Any]]] = {
            OPEN.name: self.open,
            CLOSE.name: self.close,
            DISPATCH.name: self.dispatch,
            RECORD.name: self.record,
        }
        if effect.name == OPEN.name:
            if self.stopping():
                # Its pollers may still hand it work for a moment; a run it opened now would
                # have no one to take its next call. Another worker opens it.
                raise ApplicationError(
                    f"the worker {self.queue} is stopping: another worker opens the run",
                    type=WORKER_STOPPING,
                    non_retryable=True,
                )
            if self.capacity is not None and len(self.runs) + self.opening >= self.capacity:
                # Two queues' gates (the shared one, its repository's) each let a poll begin
                # below capacity: an open one of them brought beyond it goes elsewhere.
                raise ApplicationError(
                    f"the worker {self.queue} holds all the runs it may: another worker "
                    "opens the run",
                    type=WORKER_STOPPING,
                    non_retryable=True,
                )
            # Counted with no await since the check: a drain that begins from here on waits
            # for the run this open may hold, never stops polling before it is held.
            self.opening += 1
            try:
                return await self.open(arg)
            finally:
                self.opening -= 1
        if effect.name in own:
            return await own[effect.name](arg)
        sent: Sent[Any] = arg
        call = sent.call
        performed = await self._on_run(
            plan_of(call).run_id,
            sent.pending,
            lambda fx: getattr(fx, effect.name)(call),
            key=_key(effect, sent),
        )
        return performed

    @abstractmethod
    async def open(self, call: OpenRequest) -> Opened:
        """Open the run ``call`` asks for and hold it here (:meth:`hold`)."""

    @abstractmethod
    async def close(self, call: CloseIn) -> Closed:
        """Close a run, held here or not, and settle its task."""

    # -- the run's life ----------------------------------------------------------------------

    async def hold(self, fx: RunEffects, call: OpenRequest) -> Opened:
        """Open the run with ``fx`` and hold it here. Preflight and arm here and now: two round
        trips fewer. If either fails, the graph's own calls repeat it and meet the failure
        where the graph handles it."""
        handle = await _faults(fx.open(call))
        handle = dataclasses.replace(handle, worker=self.queue)
        held = Held(fx, handle)
        self.runs[call.run_id] = held
        try:
            with recording_groups(held.groups):
                unresolved = await fx.preflight(handle.plan)
                await fx.arm(handle.plan)
        except Exception:
            held.opened = Opened(handle, prepared=False)
        else:
            held.opened = Opened(handle, unresolved=unresolved, prepared=True)
        return held.opened

    async def dispatch(self, arg: Sent[SeatCall]) -> Dispatched:
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

        key = _key(DISPATCH, arg)
        return await self._on_run(call.plan.run_id, arg.pending, run, progress, stops=True, key=key)

    async def record(self, arg: Sent[RecordCall]) -> RunRecorded:
        run_id = arg.call.handle.plan.run_id
        try:
            record = lambda fx: fx.record(arg.call)  # noqa: E731
            return await self._on_run(run_id, arg.pending, record, key=_key(RECORD, arg))
        except ApplicationError:
            raise
        except LedgerConflict as exc:  # closed meanwhile (its worker was thought lost)
            raise ApplicationError(str(exc), type=RUN_STOPPED, non_retryable=True) from exc
        finally:
            self._let_go(run_id)

    # -- plumbing ----------------------------------------------------------------------------

    async def _on_run(
        self,
        run_id: str,
        pending: Pending,
        effect: Callable[[RunEffects], Awaitable[T]],
        progress: Callable[[], dict[str, Any]] | None = None,
        *,
        stops: bool = False,
        key: str | None = None,
    ) -> T:
        """Perform ``effect`` with the run's effects: its pending events first, heartbeats
        throughout; an effect's fault crosses as a non-retryable error the workflow reads.

        ``key`` names the call (the workflow's number for it): the same call again (asked
        once more after the server gave up on its activity during an outage) joins the work
        still in flight, or takes the result it came to, instead of doing it twice. Only a
        cancellation by the server's timeout leaves the work going; any other stops it (and
        its coders). A failed call is forgotten: a retry of it performs it again."""
        held = self.runs.get(run_id)
        if held is None:
            raise ApplicationError(
                f"this worker ({self.queue}) does not hold run {run_id}",
                type=RUN_NOT_HELD,
                non_retryable=True,
            )
        async with self._beating(progress or (lambda: {"run": run_id})):
            with recording_groups(held.groups):
                work = held.inflight.get(key) if key is not None else None
                if work is None:
                    work = asyncio.ensure_future(self._performed(held, pending, effect))
                    work.add_done_callback(_retrieved)
                    if key is not None:
                        held.inflight[key] = work
                try:
                    result: T = await asyncio.shield(work)
                except asyncio.CancelledError:
                    if key is not None and _given_up_by_the_server():
                        raise  # the work goes on; the workflow calls again and joins it
                    work.cancel()
                    held.inflight.pop(key or "", None)
                    if stops:  # the coders run on in their own groups: end them
                        await asyncio.shield(asyncio.to_thread(stop_recorded_groups, held.groups))
                    raise
                except BaseException:
                    held.inflight.pop(key or "", None)
                    raise
                return result  # kept under its key: its completion may never reach the server

    async def _performed(
        self, held: Held, pending: Pending, effect: Callable[[RunEffects], Awaitable[T]]
    ) -> T:
        await self._write(held, pending)
        return await _faults(effect(held.fx))

    async def _write(self, held: Held, pending: Pending) -> None:
        """Write the events this worker has not written yet, each number once."""
        async with held.lock:
            for number, event in enumerate(pending.events, start=pending.first):
                if number > held.written:
                    await held.fx.emit(event)
                    held.written = number

    def _let_go(self, run_id: str) -> None:
        held = self.runs.pop(run_id, None)
        if held is not None:
            for work in held.inflight.values():  # no call of the run will join them now
                work.cancel()
            held.fx.close()
            self.changed()

    @contextlib.asynccontextmanager
    async def _beating(self, details: Callable[[], dict[str, Any]]) -> AsyncIterator[None]:
        """Heartbeat every few seconds while the activity works. The first beat waits that
        long too: most calls end sooner, and a beat is a request to the server."""

        async def beat() -> None:
            while True:
                await asyncio.sleep(self.heartbeat_every)
                # When: a timeout that fired long after the last beat met a server that was
                # away, not a dead worker (the workflow then calls again instead of giving up).
                activity.heartbeat({**details(), BEAT_AT: time.time()})

        beating = asyncio.create_task(beat())
        try:
            yield
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating


def _key(effect: Effect[Any, Any], sent: Sent[Any]) -> str | None:
    """What names a call to the worker across its askings (None: a workflow that numbers
    none, started before calls were numbered)."""
    return None if sent.number is None else f"{effect.name}#{sent.number}"


def _retrieved(work: asyncio.Future[Any]) -> None:
    """Take a finished work's exception, so one no call awaits any more is not reported as
    never retrieved (the call that awaits it still gets it)."""
    if not work.cancelled():
        work.exception()


def _given_up_by_the_server() -> bool:
    """Whether this activity was cancelled because the server no longer has it (its
    heartbeat timed out while the server was away): not by the workflow, nor a shutdown."""
    details = activity.cancellation_details()
    return details is not None and (details.timed_out or details.not_found)


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


__all__ = ["Held", "RunEffects", "RunsHeld"]
