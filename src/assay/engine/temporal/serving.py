"""``assay serve --temporal``: submit every runnable task as its workflow, and watch them end.

The workflow id is the task's (:func:`config.workflow_id`): a task whose workflow still runs is
never submitted again, so two serves, or a rescan, never run one task twice at once. What a
workflow came to is said as it ends; a task it left runnable (failed, refunded) is submitted
again on a later scan, until settle holds it or makes it done — as the local queue does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from temporalio.client import Client

from assay.adapters.store.sql import Ledger
from assay.engine.temporal.calls import RunOutcome
from assay.engine.temporal.client import submit
from assay.engine.temporal.config import Timeouts, workflow_id


@dataclass
class Served:
    submitted: int = 0
    finished: int = 0
    outcomes: list[RunOutcome] = field(default_factory=list)


async def serve_queue(
    client: Client,
    ledger: Ledger,
    *,
    task_queue: str,
    once: bool,
    poll: float,
    say: Callable[[str], None],
    stopping: Callable[[], bool],
    timeouts: Timeouts | None = None,
) -> Served:
    served = Served()
    running: dict[str, asyncio.Task[RunOutcome]] = {}
    skipped: set[str] = set()
    while not stopping():
        tasks, unreadable = await asyncio.to_thread(ledger.scan_tasks)
        for task_id, problem in unreadable:  # said once; the other tasks still run
            if task_id not in skipped:
                skipped.add(task_id)
                say(f"skipping task {task_id}: unreadable: {problem}")
        now = datetime.now(UTC)
        fresh = [t.id for t in tasks if t.runnable(now) and t.id not in running]
        for task_id in fresh:
            handle = await submit(client, task_id, task_queue=task_queue, timeouts=timeouts)
            if handle is None:  # its workflow runs already (another serve submitted it)
                handle = client.get_workflow_handle(workflow_id(task_id), result_type=RunOutcome)
            else:
                served.submitted += 1
                say(f"{task_id}: submitted as workflow {handle.id}")
            running[task_id] = asyncio.create_task(handle.result())
        for task_id, waiting in list(running.items()):
            if waiting.done():
                del running[task_id]
                served.finished += 1
                outcome = waiting.result()
                served.outcomes.append(outcome)
                say(_said(outcome))
        if once and not fresh and not running:
            break
        await asyncio.sleep(poll if not fresh else 0.05)
    for waiting in running.values():
        waiting.cancel()
    return served


def _said(outcome: RunOutcome) -> str:
    runs = ", ".join(outcome.runs) or "no run"
    lost = f" ({outcome.lost} lost worker(s))" if outcome.lost else ""
    if outcome.status is None:
        return f"{outcome.task_id}: {outcome.note or 'nothing ran'}"
    return f"{outcome.task_id}: {outcome.status} -> {outcome.task_status} [{runs}]{lost}"
