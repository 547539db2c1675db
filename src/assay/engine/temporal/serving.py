"""``assay serve --temporal``: the engine's queue worker with "submit the task's workflow and
wait for it" as its step (:class:`assay.engine.worker.QueueWorker` does the rest: the scan,
what is runnable, waits and unreadable tasks said once).

The workflow id is the task's (:func:`config.workflow_id`): a task whose workflow still runs
is never submitted again — two serves, or a rescan, never run one task twice at once; the
step then waits for that workflow instead. A task a workflow left runnable (failed, refunded)
is submitted again on a later scan, until settle holds it or makes it done, as locally.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from assay.adapters.temporal_connection import TemporalConnection
from assay.core.tasks import Task
from assay.engine.temporal.calls import RunOutcome
from assay.engine.temporal.client import connect, submit
from assay.engine.temporal.config import Timeouts, workflow_id

T = TypeVar("T")

IN_FLIGHT = 256  # workflows one serve keeps going at once (the workers bound the real work)
OUTAGE_SECONDS = 300.0  # how long a Temporal that does not answer is waited for
_RETRY_SECONDS = (1.0, 2.0, 5.0)  # between tries, the last repeated
_UNREACHABLE = (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED)
# A call that failed after running this long had the server's answers meanwhile (a wait's long
# polls): its failure starts a new outage, with its own bound.
_NEW_OUTAGE_AFTER = 120.0


class WorkflowStep:
    """A step for the queue worker's threads: one event loop (in a thread of its own) holds
    the Temporal client; each call submits a task's workflow and waits for what it came to."""

    def __init__(
        self,
        connection: TemporalConnection,
        *,
        task_queue: str,
        timeouts: Timeouts | None = None,
        on_submit: Callable[[str, str], None] = lambda _task, _workflow: None,
        on_outage: Callable[[str], None] = lambda _said: None,
        outage: float = OUTAGE_SECONDS,
        on_warning: Callable[[str], None] = lambda _said: None,
    ) -> None:
        self.task_queue = task_queue
        self.timeouts = timeouts
        self.on_submit = on_submit
        self.on_outage = on_outage
        self.outage = outage
        self._down = False  # said once per outage, not by every waiting task
        self.submitted = 0
        self._waits: set[asyncio.Task[RunOutcome]] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.client: Client = self._run(connect(connection, on_warning=on_warning))

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __call__(self, task: Task) -> RunOutcome:
        return self._run(self._waited(task.id, task.repository))

    async def _waited(self, task_id: str, repository: str | None = None) -> RunOutcome:
        wait = asyncio.ensure_future(self._submit_and_wait(task_id, repository))
        self._waits.add(wait)
        try:
            return await wait
        except asyncio.CancelledError:  # serve is stopping: the workflow goes on without it
            return RunOutcome(task_id, note="serve stopped waiting; its workflow goes on")
        finally:
            self._waits.discard(wait)

    def abandon(self) -> None:
        """Stop waiting for the workflows in flight (they go on; the workers finish them)."""

        def cancel() -> None:
            for wait in list(self._waits):
                wait.cancel()

        self._loop.call_soon_threadsafe(cancel)

    async def _submit_and_wait(self, task_id: str, repository: str | None) -> RunOutcome:
        handle = await self._patiently(
            lambda: submit(
                self.client,
                task_id,
                task_queue=self.task_queue,
                timeouts=self.timeouts,
                repository=repository,  # its runs open on that repository's queue
            )
        )
        if handle is not None:
            self.submitted += 1
            self.on_submit(task_id, handle.id)
            result: RunOutcome = await self._patiently(handle.result)
            return result
        # Its workflow runs already (another serve submitted it, or a try the outage cut
        # short did): wait for that one.
        running = self.client.get_workflow_handle(workflow_id(task_id), result_type=RunOutcome)
        waited: RunOutcome = await self._patiently(running.result)
        return waited

    async def _patiently(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``, tried again while Temporal does not answer (restarted, a network
        blip), for :attr:`outage` seconds at most from the outage's first failure (a wait for
        a workflow lasts as long as the workflow: the time before it failed was no outage, nor
        the time between two outages); the outage said once, and its end."""
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        tries = 0
        while True:
            began = loop.time()
            try:
                result = await call()
            except RPCError as exc:
                if deadline is None or loop.time() - began > _NEW_OUTAGE_AFTER:
                    deadline = loop.time() + self.outage  # a new outage: the server answered
                    tries = 0
                if exc.status not in _UNREACHABLE or loop.time() >= deadline:
                    raise
                if not self._down:
                    self._down = True
                    self.on_outage(
                        f"Temporal does not answer ({exc.message}): trying again for up to "
                        f"{self.outage:g} s; the workflows and workers go on"
                    )
                await asyncio.sleep(_RETRY_SECONDS[min(tries, len(_RETRY_SECONDS) - 1)])
                tries += 1
                continue
            if self._down:
                self._down = False
                self.on_outage("Temporal answers again")
            return result

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
