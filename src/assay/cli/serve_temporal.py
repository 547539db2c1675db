"""``assay serve --temporal HOST:PORT``: the queue worked by Temporal workers, not here."""

from __future__ import annotations

import asyncio

import typer

from assay.cli.workspace import EXIT_USAGE, Workspace, fail


def serve_temporal(
    *, temporal: str, task_queue: str, namespace: str, once: bool, poll: float
) -> None:
    """Submit every runnable task as its workflow; with ``once``, until none is runnable and
    every workflow submitted has ended."""
    from assay.cli.signals import graceful_stop, interrupted_exit
    from assay.cli.worker import temporal_ledger
    from assay.engine.temporal.client import TemporalUnreachable, connect
    from assay.engine.temporal.serving import serve_queue

    workspace = Workspace.find()
    ledger = temporal_ledger(workspace)

    def say(line: str) -> None:
        typer.echo(line, err=True)

    async def main() -> int:
        try:
            client = await connect(temporal, namespace)
        except TemporalUnreachable as exc:
            fail(str(exc), EXIT_USAGE)
        served = await serve_queue(
            client,
            ledger,
            task_queue=task_queue,
            once=once,
            poll=poll,
            say=say,
            stopping=lambda: interrupted_exit() is not None,
        )
        return served.finished

    with graceful_stop():
        finished = asyncio.run(main())
    typer.echo(f"served {finished} workflow(s)", err=True)
    stopped = interrupted_exit()
    if stopped is not None:
        raise typer.Exit(stopped)
