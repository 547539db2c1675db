"""``assay serve``: work the queue with N concurrent runs until stopped (or until idle)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from assay.cli.signals import graceful_stop, interrupted_exit
from assay.cli.workspace import Workspace, fail, refuse_unconfinable

if TYPE_CHECKING:
    from assay.adapters.store.sql import Ledger


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
) -> None:
    """Run queued (and failed, runnable) tasks, N at a time; interrupted runs are closed first.

    Each task runs until settle makes it done, held, or failed; a failed task is picked up
    again until max_attempts hold it for a human. A task that waits for its provider quota is
    skipped until its time (said once per wait); with --once, it does not keep serve running.
    SIGINT / SIGTERM stop the coders, close the runs in progress as interrupted, and exit
    130 / 143. What closed runs left behind is collected at start and every --gc-every
    (see `assay gc`).
    """
    if temporal is not None:
        from assay.cli.serve_temporal import serve_temporal

        serve_temporal(
            temporal=temporal, task_queue=task_queue, namespace=namespace, once=once, poll=poll
        )
        return
    from assay.adapters.store.sql import LedgerConflict
    from assay.cli.explain import waits_message
    from assay.cli.progress import Progress
    from assay.core.gc import DurationError, parse_duration
    from assay.engine.interrupt import RunInterrupted
    from assay.engine.runner import recover_interrupted, run_task

    durations = []
    for flag, text in (("--gc-every", gc_every), ("--gc-older-than", gc_older_than)):
        try:
            durations.append(parse_duration(text))
        except DurationError as exc:
            fail(f"{flag}: {exc}")
    every, retention = durations
    workspace = Workspace.find()
    ledger = workspace.ledger()
    for run_id in recover_interrupted(
        repo=workspace.repo,
        home=workspace.home,
        ledger=ledger,
        contract_for=workspace.load_contract,
    ):
        typer.echo(f"recovered interrupted run {run_id}", err=True)

    busy: set[str] = set()
    closed = {"runs": 0, "interrupted": 0}  # counted as each run closes, interrupted ones too
    announced: dict[str, datetime] = {}  # task -> the wait already reported
    skipped: set[str] = set()  # unreadable tasks already reported
    guard = threading.Lock()
    progress = Progress(quiet=concurrency > 1)

    def work(task_id: str) -> None:
        try:
            task = ledger.get_task(task_id)
            if not task.runnable(datetime.now(UTC)):
                return
            contract = workspace.load_contract(task_id)
            refuse_unconfinable(contract)  # exit 2 (re-raised by the loop), the task untouched
            report = run_task(
                repo=workspace.repo,
                home=workspace.home,
                ledger=ledger,
                task=task,
                contract=contract,
                sink=progress,
            )
            settled = report.settlement
            with guard:
                closed["runs"] += 1
            typer.echo(
                f"{task_id}: {report.payload.status.value} -> {settled.new_status.value}", err=True
            )
        except LedgerConflict:
            pass  # another worker claimed it first
        except RunInterrupted as stop:
            with guard:
                closed["runs"] += 1
                closed["interrupted"] += 1
            typer.echo(f"{task_id}: {stop}; closed as interrupted, runnable again", err=True)
        finally:
            with guard:
                busy.discard(task_id)

    next_gc = time.monotonic()  # right away: a serve restarted often still collects

    with graceful_stop(), ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures: list[Future[None]] = []
        try:
            while interrupted_exit() is None:
                if every and time.monotonic() >= next_gc:
                    _collect(workspace, ledger, retention)
                    next_gc = time.monotonic() + every
                now = datetime.now(UTC)
                tasks, unreadable = ledger.scan_tasks()
                for task_id, problem in unreadable:  # said once; the other tasks still run
                    if task_id not in skipped:
                        skipped.add(task_id)
                        typer.echo(f"skipping task {task_id}: unreadable: {problem}", err=True)
                for task in tasks:
                    if task.waiting(now) and announced.get(task.id) != task.not_before:
                        assert task.not_before is not None
                        announced[task.id] = task.not_before
                        typer.echo(f"skipping: {waits_message(task, now)}", err=True)
                with guard:
                    free = concurrency - len(busy)
                    runnable = [t.id for t in tasks if t.runnable(now) and t.id not in busy][:free]
                    busy.update(runnable)
                futures.extend(pool.submit(work, task_id) for task_id in runnable)
                for future in [f for f in futures if f.done()]:
                    futures.remove(future)
                    future.result()
                if once and not runnable and not futures:
                    break
                time.sleep(poll if not runnable else 0.05)
        except KeyboardInterrupt:
            typer.echo("stopping: waiting for the runs in progress to close", err=True)
    stopped_runs = f" ({closed['interrupted']} interrupted)" if closed["interrupted"] else ""
    typer.echo(f"served {closed['runs']} run(s){stopped_runs}", err=True)
    stopped = interrupted_exit()
    if stopped is not None:
        raise typer.Exit(stopped)


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
