"""A Temporal worker process: its pollers over one :class:`Activities`.

- the shared queue: the workflows, and ``open`` — taken only while this worker holds fewer
  runs than it may (:class:`RunGate`), so a busy worker leaves new runs to one with room
  instead of queueing them behind its own;
- its repository's queue (:func:`.config.repository_queue`): ``open`` of that repository's
  tasks, gated alike (the shared queue's opens are those of tasks that name no repository);
- its own queue: every later activity of the runs it opened (never gated: a live worker takes
  them at once, which is what lets a schedule-to-start timeout mean "this worker is gone");
- the close queues, its repository's and the shared one's: closing runs whose worker was lost
  (any worker of the run's repository, whatever it holds).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable, Sequence
from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import (
    CustomSlotSupplier,
    FixedSizeSlotSupplier,
    SlotMarkUsedContext,
    SlotPermit,
    SlotReleaseContext,
    SlotReserveContext,
    Worker,
    WorkerTuner,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from assay.engine.temporal.activities import Activities
from assay.engine.temporal.config import close_queue, repository_queue
from assay.engine.temporal.table import Queue
from assay.engine.temporal.workflow import RunWorkflow
from assay.engine.worker import Cadence

SWEEP_SECONDS = 30.0  # how often runs closed elsewhere are let go
# On SIGINT/SIGTERM the coders are stopped at once and each activity in flight reaches its
# next boundary and says the run was interrupted; the pollers wait that long for it instead of
# cancelling the activity (which would read as a lost worker, by a timeout, seconds later).
SHUTDOWN_GRACE = timedelta(seconds=15)


class RunGate(CustomSlotSupplier):
    """Activity slots of the shared queue: one is reserved (a poll begins) only while the runs
    held plus the slots reserved stay under ``capacity`` and the worker is not stopping; the
    poll waits otherwise."""

    def __init__(
        self, capacity: int, held: Callable[[], int], stopping: Callable[[], bool] = lambda: False
    ) -> None:
        self.capacity = capacity
        self.held = held
        self.stopping = stopping
        self.reserved = 0
        self._room = asyncio.Event()
        self._room.set()

    def _has_room(self) -> bool:
        return not self.stopping() and self.held() + self.reserved < self.capacity

    def changed(self) -> None:
        """A run was let go (or a slot released): a waiting poll may start."""
        if self._has_room():
            self._room.set()

    async def reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit:
        while not self._has_room():
            self._room.clear()
            await self._room.wait()
        self.reserved += 1
        return SlotPermit()

    def try_reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit | None:
        if not self._has_room():
            return None
        self.reserved += 1
        return SlotPermit()

    def mark_slot_used(self, ctx: SlotMarkUsedContext) -> None:
        pass

    def release_slot(self, ctx: SlotReleaseContext) -> None:
        self.reserved = max(0, self.reserved - 1)
        self.changed()


def _gated(gate: RunGate) -> WorkerTuner:
    """A tuner whose activity slots are ``gate``'s."""
    return WorkerTuner.create_composite(
        workflow_supplier=FixedSizeSlotSupplier(100),
        activity_supplier=gate,
        local_activity_supplier=FixedSizeSlotSupplier(10),
        nexus_supplier=FixedSizeSlotSupplier(1),
    )


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox the workflow replays in. The engine's modules pass through (imported once,
    outside): the graph is kept deterministic by its import contract (no adapter, no clock),
    and its types must be the very classes the data converter builds."""
    passed = SandboxRestrictions.default.with_passthrough_modules(
        "assay", "pydantic", "pydantic_core", "annotated_types", "yaml", "pathspec"
    )
    return SandboxedWorkflowRunner(restrictions=passed)


async def run_worker(
    client: Client,
    *,
    task_queue: str,
    activities: Activities,
    max_runs: int,
    stop: asyncio.Event,
    ready: Callable[[], None] = lambda: None,
    every: Sequence[Cadence] = (),
    build_id: str | None = None,
) -> None:
    """Serve until ``stop`` is set; then stop polling and let the activities in flight end.
    Each of ``every`` (this machine's ``assay gc``: no one else collects a worker's
    leftovers) runs as in the queue worker, once it is ready and then on its cadence, in a
    thread, one at a time; a stop waits for one in progress. ``build_id``: the code's
    (:mod:`build`), recorded by Temporal with each task its pollers complete."""
    loop = asyncio.get_running_loop()
    # Coders, git and the ledger run in threads: never fewer than the coders allowed at once.
    threads = concurrent.futures.ThreadPoolExecutor(max_workers=max(32, 4 * max_runs))
    loop.set_default_executor(threads)
    gates = [RunGate(max_runs, lambda: len(activities.runs), activities.stopping)]
    activities.capacity = max_runs  # what the gates of two queues together may not exceed
    own = Worker(
        client,
        task_queue=activities.queue,
        activities=activities.on(Queue.RUN),
        max_concurrent_activities=1000,
        graceful_shutdown_timeout=SHUTDOWN_GRACE,
        build_id=build_id,
    )
    shared = Worker(
        client,
        task_queue=task_queue,
        workflows=[RunWorkflow],
        workflow_runner=workflow_runner(),
        activities=activities.on(Queue.SHARED),
        tuner=_gated(gates[0]),
        graceful_shutdown_timeout=SHUTDOWN_GRACE,
        build_id=build_id,
    )
    closer = Worker(
        client,
        task_queue=close_queue(task_queue),
        activities=[activities.closing()],
        graceful_shutdown_timeout=SHUTDOWN_GRACE,
        build_id=build_id,
    )
    pollers = [own, shared, closer]
    if activities.repository is not None:
        # Its repository's queue: the opens (gated as the shared queue's) and the lost-run
        # closes of that repository's tasks; the shared queues still serve tasks of none.
        mine = repository_queue(task_queue, activities.repository)
        gates.append(RunGate(max_runs, lambda: len(activities.runs), activities.stopping))
        pollers.append(
            Worker(
                client,
                task_queue=mine,
                activities=activities.on(Queue.SHARED),
                tuner=_gated(gates[1]),
                graceful_shutdown_timeout=SHUTDOWN_GRACE,
                build_id=build_id,
            )
        )
        pollers.append(
            Worker(
                client,
                task_queue=close_queue(mine),
                activities=[activities.closing()],
                graceful_shutdown_timeout=SHUTDOWN_GRACE,
                build_id=build_id,
            )
        )

    def changed() -> None:
        for gate in gates:
            gate.changed()

    activities.changed = changed
    # Its own queue first: an open this worker takes is always followed by someone polling.
    async with contextlib.AsyncExitStack() as polling:
        for poller in pollers:
            await polling.enter_async_context(poller)
        ready()
        cadences = [c for c in every if c.every > 0]
        due = [loop.time() for _ in cadences]
        doing: list[asyncio.Task[None] | None] = [None for _ in cadences]
        while not stop.is_set():
            for n, cadence in enumerate(cadences):
                running = doing[n]
                if loop.time() >= due[n] and (running is None or running.done()):
                    doing[n] = loop.create_task(asyncio.to_thread(cadence.action))
                    due[n] = loop.time() + cadence.every
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SWEEP_SECONDS)
            if not stop.is_set():
                with contextlib.suppress(Exception):  # a ledger blip: the next sweep
                    await activities.sweep()
        for task in doing:
            if task is not None and not task.done():
                with contextlib.suppress(Exception):
                    await task  # a removal half-done is finished, not abandoned
