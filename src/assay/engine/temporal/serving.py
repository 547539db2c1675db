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
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from temporalio.client import Client

from assay.adapters.temporal_connection import TemporalConnection
from assay.core.tasks import Task
from assay.engine.temporal.calls import RunOutcome
from assay.engine.temporal.client import connect, submit
from assay.engine.temporal.config import Timeouts, workflow_id

T = TypeVar("T")

IN_FLIGHT = 256  # workflows one serve keeps going at once (the workers bound the real work)


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
    ) -> None:
        self.task_queue = task_queue
        self.timeouts = timeouts
        self.on_submit = on_submit
        self.submitted = 0
        self._waits: set[asyncio.Task[RunOutcome]] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.client: Client = self._run(connect(connection))

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __call__(self, task: Task) -> RunOutcome:
        return self._run(self._waited(task.id))

    async def _waited(self, task_id: str) -> RunOutcome:
        wait = asyncio.ensure_future(self._submit_and_wait(task_id))
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

    async def _submit_and_wait(self, task_id: str) -> RunOutcome:
        handle = await submit(
            self.client, task_id, task_queue=self.task_queue, timeouts=self.timeouts
        )
        if handle is not None:
            self.submitted += 1
            self.on_submit(task_id, handle.id)
            result: RunOutcome = await handle.result()
            return result
        # Its workflow runs already (another serve submitted it): wait for that one.
        running = self.client.get_workflow_handle(workflow_id(task_id), result_type=RunOutcome)
        waited: RunOutcome = await running.result()
        return waited

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
