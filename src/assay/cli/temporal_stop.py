"""``assay task cancel|hold`` of a running task reaches its Temporal workflow.

Set ``ASSAY_TEMPORAL=HOST:PORT`` (and ``ASSAY_TEMPORAL_NAMESPACE``; the credentials in
``ASSAY_TEMPORAL_TLS_CERT`` / ``_TLS_KEY`` / ``_TLS_CA`` / ``_TLS_SERVER_NAME`` /
``_API_KEY_ENV``) where the runs
are on Temporal: a running task cannot be held in the ledger (its run settles it), so its
workflow is signalled instead; the workflow stops the run (coders stopped, the run closed as
interrupted, refunded) and holds the task. This waits for that, up to ``wait`` seconds.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

import typer

from assay.cli.temporal_options import temporal_connection
from assay.cli.workspace import EXIT_USAGE, fail
from assay.core.vocab import TaskStatus

if TYPE_CHECKING:
    from assay.core.tasks import Task


def stop_running(task: Task, reason: str, *, wait: float = 60.0) -> bool:
    """True when the task's workflow was told to stop (and what came of it was said)."""
    from assay.engine.temporal.config import DEFAULT_NAMESPACE, NAMESPACE_ENV, TEMPORAL_ENV

    target = os.environ.get(TEMPORAL_ENV)
    if not target or task.status is not TaskStatus.RUNNING:
        return False
    from assay.cli.extras import require

    require("temporalio", f"stopping task {task.id} on Temporal ({TEMPORAL_ENV} is set)")
    namespace = (
        os.environ.get(NAMESPACE_ENV) or os.environ.get("TEMPORAL_NAMESPACE") or DEFAULT_NAMESPACE
    )
    connection = temporal_connection(target, namespace, warn=False)  # credentials: from env

    async def go() -> str | None:
        from assay.engine.temporal.client import TemporalUnreachable, connect, outcome, stop

        try:
            client = await connect(connection)
        except TemporalUnreachable as exc:
            fail(str(exc), EXIT_USAGE)
        if not await stop(client, task.id, reason):
            return None
        try:
            done = await asyncio.wait_for(outcome(client, task.id), wait)
        except TimeoutError:
            return "stopping; held once its run closes"
        return done.task_status or "stopped"

    said = asyncio.run(go())
    if said is None:
        return False
    typer.echo(f"{task.id}: {said}")
    return True
