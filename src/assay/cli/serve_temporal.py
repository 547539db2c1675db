"""``assay serve --temporal HOST:PORT``: the queue worked by Temporal workers, not here."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import typer

from assay.cli.web_options import WebOptions, dashboard, serve_web_only
from assay.cli.workspace import EXIT_USAGE, Workspace, fail

if TYPE_CHECKING:
    from assay.adapters.temporal_connection import TemporalConnection
    from assay.core.tasks import Task


def serve_temporal(
    *,
    connection: TemporalConnection,
    task_queue: str,
    once: bool,
    poll: float,
    web: WebOptions | None = None,
) -> None:
    """Submit every runnable task as its workflow; with ``once``, until none is runnable and
    every workflow submitted has ended. No recovery and no gc here: the workers hold the runs
    (a lost one is closed by its workflow) and their own folders. The dashboard reads the
    shared ledger; it can re-arm only halts whose state files are on this machine."""
    from assay.cli.outcome import workflow_said
    from assay.cli.signals import graceful_stop, interrupted_exit
    from assay.cli.temporal_stop import web_stopper
    from assay.cli.worker import temporal_ledger
    from assay.engine.temporal.calls import RunOutcome
    from assay.engine.temporal.client import TemporalUnreachable
    from assay.engine.temporal.serving import IN_FLIGHT, WorkflowStep
    from assay.engine.worker import QueueEvents, QueueWorker

    web = web or WebOptions()
    workspace = Workspace.shared()  # it only submits: no repository needed
    ledger = temporal_ledger(workspace)
    state_dir = workspace.home / "halt-state"
    stopper = web_stopper(connection)  # the dashboard's stop reaches the task's workflow
    if web.only:
        serve_web_only(web, ledger, state_dir, temporal_stop=stopper)
        return
    try:
        step = WorkflowStep(
            connection,
            task_queue=task_queue,
            on_submit=lambda task_id, workflow: typer.echo(
                f"{task_id}: submitted as workflow {workflow}", err=True
            ),
            on_outage=lambda said: typer.echo(f"assay: {said}", err=True),
            on_warning=lambda said: typer.echo(f"assay: WARNING: {said}", err=True),
        )
    except TemporalUnreachable as exc:
        fail(str(exc), EXIT_USAGE)

    class Said(QueueEvents[RunOutcome]):
        def unreadable(self, task_id: str, problem: str) -> None:
            typer.echo(f"skipping task {task_id}: unreadable: {problem}", err=True)

        def waiting(self, task: Task, now: datetime) -> None:
            from assay.cli.explain import waits_message

            typer.echo(f"skipping: {waits_message(task, now)}", err=True)

        def finished(self, task_id: str, result: RunOutcome) -> None:
            typer.echo(workflow_said(result), err=True)

        def stopping(self) -> None:
            typer.echo("stopping: the workflows go on; the workers finish them", err=True)

    worker = QueueWorker(
        ledger,
        step,
        concurrency=IN_FLIGHT,
        once=once,
        poll=poll,
        events=Said(),
        abandon=step.abandon,  # a stop stops waiting: the workflows go on, the workers end them
    )
    try:
        with graceful_stop(), dashboard(web, ledger, state_dir, temporal_stop=stopper):
            served = worker.run()
    finally:
        step.close()
    typer.echo(f"served {served.runs} workflow(s), {step.submitted} submitted", err=True)
    stopped = interrupted_exit()
    if stopped is not None:
        raise typer.Exit(stopped)
