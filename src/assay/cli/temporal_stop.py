"""A stop of a running task (``assay task stop``, ``hold``, ``cancel``; the dashboard of
``assay serve --temporal``) reaches its Temporal workflow.

Set ``ASSAY_TEMPORAL=HOST:PORT`` (and ``ASSAY_TEMPORAL_NAMESPACE``; the credentials in
``ASSAY_TEMPORAL_TLS_CERT`` / ``_TLS_KEY`` / ``_TLS_CA`` / ``_TLS_SERVER_NAME`` /
``_API_KEY_ENV``) where the runs
are on Temporal: a running task cannot be held in the ledger (its run settles it), so its
workflow is signalled instead, with who asked; the workflow stops the run (coders stopped, the
run closed as interrupted, refunded) and holds the task, recorded with who asked. The CLI waits
for that, up to ``wait`` seconds; the dashboard does not wait.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from assay.cli.temporal_options import temporal_connection
from assay.cli.workspace import EXIT_USAGE, fail
from assay.core.vocab import TaskStatus

if TYPE_CHECKING:
    from assay.adapters.stop_request import StopAsk
    from assay.adapters.temporal_connection import TemporalConnection
    from assay.core.tasks import Task
    from assay.engine.operations.stopping import TemporalStop

WAITING = "stopping; held once its run closes"


def temporal_settings() -> TemporalConnection | None:
    """Where the runs are on Temporal (``ASSAY_TEMPORAL``), or None: they are not."""
    from assay.engine.temporal.config import DEFAULT_NAMESPACE, NAMESPACE_ENV, TEMPORAL_ENV

    target = os.environ.get(TEMPORAL_ENV)
    if not target:
        return None
    from assay.cli.extras import require

    require("temporalio", f"stopping a running task on Temporal ({TEMPORAL_ENV} is set)")
    namespace = (
        os.environ.get(NAMESPACE_ENV) or os.environ.get("TEMPORAL_NAMESPACE") or DEFAULT_NAMESPACE
    )
    return temporal_connection(target, namespace, warn=False)  # credentials: from env


def temporal_stopper(
    connection: TemporalConnection,
    *,
    wait: float = 0.0,
    say: Callable[[str, str], None] | None = None,
) -> TemporalStop:
    """Signal the task's workflow to stop with the request (who asked, why); ``wait`` > 0:
    then wait that long for its run to close, and ``say(task_id, what came of it)``. An
    unreachable server raises ``TemporalUnreachable``."""

    def send(task: Task, ask: StopAsk) -> bool:
        from assay.engine.temporal.calls import StopRequest
        from assay.engine.temporal.client import connect, outcome, stop

        request = StopRequest(ask.reason, True, ask.by, ask.via, ask.action)

        async def go() -> str | None:
            client = await connect(connection)
            if not await stop(client, task.id, request):
                return None
            if wait <= 0:
                return WAITING
            try:
                done = await asyncio.wait_for(outcome(client, task.id), wait)
            except TimeoutError:
                return WAITING
            return done.task_status or "stopped"

        said = asyncio.run(go())
        if said is None:
            return False
        if say is not None:
            say(task.id, said)
        return True

    return send


def cli_stopper(say: Callable[[str, str], None], *, wait: float = 60.0) -> TemporalStop | None:
    """The CLI's way to Temporal, when ``ASSAY_TEMPORAL`` is set: an unreachable server is a
    clear error, exit 2."""
    connection = temporal_settings()  # first: without the extra, its install hint
    if connection is None:
        return None
    from assay.engine.temporal.client import TemporalUnreachable

    send = temporal_stopper(connection, wait=wait, say=say)

    def guarded(task: Task, ask: StopAsk) -> bool:
        if task.status is not TaskStatus.RUNNING:
            return False
        try:
            return send(task, ask)
        except TemporalUnreachable as exc:
            fail(str(exc), EXIT_USAGE)

    return guarded


def web_stopper(connection: TemporalConnection) -> TemporalStop:
    """The dashboard's way to Temporal (``assay serve --temporal``): it sends the stop and
    does not wait; an unreachable server refuses the stop (said on the page), never a 500."""
    from assay.engine.operations.stopping import StopRefused
    from assay.engine.temporal.client import TemporalUnreachable

    send = temporal_stopper(connection)

    def guarded(task: Task, ask: StopAsk) -> bool:
        try:
            return send(task, ask)
        except TemporalUnreachable as exc:
            raise StopRefused(f"the stop did not reach Temporal: {exc}", running=True) from exc

    return guarded
