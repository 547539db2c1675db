"""``assay serve``: work the queue with N concurrent runs until stopped (or until idle)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Annotated

import typer

from assay.cli.signals import graceful_stop, interrupted_exit
from assay.cli.workspace import Workspace, refuse_unconfinable


def serve(
    concurrency: Annotated[int, typer.Option(min=1, max=64, help="Runs at once.")] = 1,
    once: Annotated[
        bool, typer.Option("--once", help="Exit when nothing is runnable instead of waiting.")
    ] = False,
    poll: Annotated[float, typer.Option(min=0.1, help="Seconds between queue checks.")] = 2.0,
) -> None:
    """Run queued (and failed, runnable) tasks, N at a time; interrupted runs are closed first.

    Each task runs until settle makes it done, held, or failed; a failed task is picked up
    again until max_attempts hold it for a human. A task that waits for its provider quota is
    skipped until its time (said once per wait); with --once, it does not keep serve running.
    SIGINT / SIGTERM stop the coders, close the runs in progress as interrupted, and exit
    130 / 143.
    """
    from assay.adapters.store.sql import LedgerConflict
    from assay.cli.explain import waits_message
    from assay.cli.progress import Progress
    from assay.engine.interrupt import RunInterrupted
    from assay.engine.runner import recover_interrupted, run_task

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

    with graceful_stop(), ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures: list[Future[None]] = []
        try:
            while interrupted_exit() is None:
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
