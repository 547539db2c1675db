"""``assay serve``: work the queue with N concurrent runs until stopped (or until idle).

The queue worker is :class:`assay.engine.worker.QueueWorker`; this module only wires it to
this repository (its step runs a task here) and prints what it says.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from assay.cli.signals import graceful_stop, interrupted_exit
from assay.cli.web_options import (
    NoWeb,
    WebHost,
    WebOnly,
    WebOptions,
    WebPort,
    WebToken,
    dashboard,
    serve_web_only,
)
from assay.cli.workspace import Workspace, fail, refuse_unconfinable
from assay.web.config import DEFAULT_HOST, DEFAULT_PORT

if TYPE_CHECKING:
    from assay.adapters.store.sql import Ledger
    from assay.core.tasks import Task
    from assay.engine.interrupt import RunInterrupted
    from assay.engine.runner import RunReport
    from assay.engine.worker import QueueEvents


def serve(
    concurrency: Annotated[int, typer.Option(min=1, max=64, help="Runs at once.")] = 1,
    once: Annotated[
        bool, typer.Option("--once", help="Exit when nothing is runnable instead of waiting.")
    ] = False,
    poll: Annotated[float, typer.Option(min=0.1, help="Seconds between queue checks.")] = 2.0,
    gc_every: Annotated[
        str,
        typer.Option(
            "--gc-every",
            metavar="DURATION",
            help="Run `assay gc` at start and then this often (30m, 1h, 1d); 0: never.",
        ),
    ] = "1h",
    gc_older_than: Annotated[
        str,
        typer.Option(
            "--gc-older-than",
            metavar="DURATION",
            help="What that gc removes: leftovers of runs closed longer ago than this.",
        ),
    ] = "7d",
    temporal: Annotated[
        str | None,
        typer.Option(
            "--temporal",
            metavar="HOST:PORT",
            help="Submit runs as Temporal workflows (workers run them; ledger on PostgreSQL).",
        ),
    ] = None,
    task_queue: Annotated[
        str, typer.Option("--task-queue", help="With --temporal: the workers' shared queue.")
    ] = "assay",
    namespace: Annotated[
        str, typer.Option(help="With --temporal: the Temporal namespace.")
    ] = "default",
    no_web: NoWeb = False,
    web_only: WebOnly = False,
    web_host: WebHost = DEFAULT_HOST,
    web_port: WebPort = DEFAULT_PORT,
    web_token: WebToken = None,
) -> None:
    """Run queued (and failed, runnable) tasks, N at a time; interrupted runs are closed first.

    Each task runs until settle makes it done, held, or failed; a failed task is picked up
    again until max_attempts hold it for a human. A task that waits for its provider quota is
    skipped until its time (said once per wait); with --once, it does not keep serve running.
    SIGINT / SIGTERM stop the coders, close the runs in progress as interrupted, and exit
    130 / 143. What closed runs left behind is collected at start and every --gc-every
    (see `assay gc`).

    The dashboard (see `--web-*`) is served beside the queue, on http://127.0.0.1:8765/ by
    default, and stops with it; --web-only serves it alone, --no-web (and --once) not at all.
    """
    web = WebOptions.of(
        no_web=no_web,
        web_only=web_only,
        host=web_host,
        port=web_port,
        token=web_token,
        once=once,
    )
    if temporal is not None:
        from assay.cli.serve_temporal import serve_temporal

        serve_temporal(
            temporal=temporal,
            task_queue=task_queue,
            namespace=namespace,
            once=once,
            poll=poll,
            web=web,
        )
        return
    if web.only:
        workspace = Workspace.find()
        serve_web_only(web, workspace.ledger(), workspace.home / "halt-state")
        return
    from assay.cli.progress import Progress
    from assay.core.gc import DurationError, parse_duration
    from assay.engine.runner import recover_interrupted, run_task
    from assay.engine.worker import Cadence, QueueWorker

    durations = []
    for flag, text in (("--gc-every", gc_every), ("--gc-older-than", gc_older_than)):
        try:
            durations.append(parse_duration(text))
        except DurationError as exc:
            fail(f"{flag}: {exc}")
    every, retention = durations
    workspace = Workspace.find()
    ledger = workspace.ledger()
    progress = Progress(quiet=concurrency > 1)

    def run_here(task: Task) -> RunReport:
        contract = workspace.load_contract(task.id)
        refuse_unconfinable(contract)  # exit 2 (re-raised by the worker), the task untouched
        return run_task(
            repo=workspace.repo,
            home=workspace.home,
            ledger=ledger,
            task=task,
            contract=contract,
            sink=progress,
        )

    def recover() -> list[str]:
        return recover_interrupted(
            repo=workspace.repo,
            home=workspace.home,
            ledger=ledger,
            contract_for=workspace.load_contract,
        )

    worker = QueueWorker(
        ledger,
        run_here,
        concurrency=concurrency,
        once=once,
        poll=poll,
        recover=recover,
        every=[Cadence(lambda: _collect(workspace, ledger, retention), every)],
        events=_said(),
    )
    with graceful_stop(), dashboard(web, ledger, workspace.home / "halt-state"):
        closed = worker.run()
    stopped_runs = f" ({closed.interrupted} interrupted)" if closed.interrupted else ""
    typer.echo(f"served {closed.runs} run(s){stopped_runs}", err=True)
    stopped = interrupted_exit()
    if stopped is not None:
        raise typer.Exit(stopped)


def _said() -> QueueEvents[RunReport]:
    """The worker's news, one line each on stderr (built here: the engine's worker module
    pulls in the store, which a command that never serves must not pay for)."""
    from assay.engine.worker import QueueEvents

    class Said(QueueEvents["RunReport"]):
        def recovered(self, run_id: str) -> None:
            typer.echo(f"recovered interrupted run {run_id}", err=True)

        def unreadable(self, task_id: str, problem: str) -> None:
            typer.echo(f"skipping task {task_id}: unreadable: {problem}", err=True)

        def waiting(self, task: Task, now: datetime) -> None:
            from assay.cli.explain import waits_message

            typer.echo(f"skipping: {waits_message(task, now)}", err=True)

        def finished(self, task_id: str, result: RunReport) -> None:
            settled = result.settlement.new_status.value
            typer.echo(f"{task_id}: {result.payload.status.value} -> {settled}", err=True)

        def interrupted(self, task_id: str, stop: RunInterrupted) -> None:
            typer.echo(f"{task_id}: {stop}; closed as interrupted, runnable again", err=True)

        def stopping(self) -> None:
            typer.echo("stopping: waiting for the runs in progress to close", err=True)

    return Said()


def _collect(workspace: Workspace, ledger: Ledger, retention: int) -> None:
    """One `assay gc` between queue checks: said in one line when it removed or failed
    something; its own error is a warning, never the end of serve."""
    from assay.cli.gc import describe
    from assay.engine.gc import collect_garbage

    try:
        report = collect_garbage(
            repo=workspace.repo, home=workspace.home, ledger=ledger, older_than=retention
        )
    except Exception as exc:  # a git or disk error in gc must not stop the queue
        typer.echo(f"gc: failed: {' '.join(str(exc).split())}", err=True)
        return
    if report.removed or report.failed:
        for line in describe(report, verbose=False):
            typer.echo(line, err=True)
    for warning in report.warnings:
        typer.echo(f"gc: warning: {warning}", err=True)
