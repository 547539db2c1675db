"""``assay run``'s jobs: each task run in turn, its events streamed and its result said.

Kept apart from the command's options (``cli/run.py``): this is the part that imports the
engine, the store and the progress display, and only once the command is sure to run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from assay.adapters.process import stop_requested
from assay.cli.event_stream import EventStream, newest_event_id
from assay.cli.signals import interrupted_exit
from assay.cli.workspace import (
    EXIT_DONE,
    EXIT_FAILED,
    EXIT_HELD,
    EXIT_INTERNAL,
    Workspace,
    print_json,
)
from assay.core.vocab import HaltType, TaskStatus

if TYPE_CHECKING:
    from assay.adapters.store.records import Event
    from assay.adapters.store.sql import Ledger
    from assay.cli.progress import Progress
    from assay.core.contract import Contract
    from assay.core.tasks import Task
    from assay.engine.effects import RunEvent
    from assay.engine.local.interrupt import RunInterrupted
    from assay.engine.local.runner import RunReport


def exit_code_for(status: TaskStatus, halt_type: HaltType) -> int:
    """The exit code a task's run says: done, held, failed, or assay's own error."""
    if halt_type is HaltType.INTERNAL_ERROR:
        return EXIT_INTERNAL
    if status is TaskStatus.DONE:
        return EXIT_DONE
    if status is TaskStatus.HELD:
        return EXIT_HELD
    return EXIT_FAILED


def event_stream(ledger: Ledger, ours: set[str]) -> EventStream:
    """The ``--events`` stream of this command's tasks, ``ours`` (another process's runs on
    the same ledger are not this command's), from the ledger's newest event on."""

    def wants(event: Event) -> bool:
        return event.task_id in ours

    return EventStream(ledger, after=newest_event_id(ledger), wants=wants)


def run_jobs(
    workspace: Workspace,
    ledger: Ledger,
    jobs: list[tuple[Task, Contract]],
    keep_worktrees: bool,
    display: Progress,
    json_output: bool,
    stream: EventStream | None = None,
) -> tuple[int, list[object]]:
    """Run each job in turn; the exit code, and the payloads still to print.

    Without ``stream``, ``--json`` prints each payload as its run ends (indented) and nothing
    is left to print. With it, each event is written the moment the run journals it, the
    human summary goes to stderr (stdout is the stream's), and the payloads are returned,
    to be printed compact after the stream's last event.
    """
    from assay.adapters.actor import cli_actor
    from assay.engine.local.interrupt import RunInterrupted
    from assay.engine.local.runner import run_task

    results: list[object] = []
    actor = cli_actor()  # who stops these runs, if anyone does: their tasks stay stopped
    unfinished = [task.id for task, _ in jobs]
    interrupted: tuple[str, RunInterrupted] | None = None
    ended: set[str] = set()

    def result(document: object) -> None:
        if stream is not None:
            results.append(document)
        elif json_output:
            print_json(document)

    def sink(event: RunEvent) -> None:
        display(event)
        if stream is not None:
            stream.pump_quietly()  # the event is in the ledger already (journaled first)

    code = EXIT_DONE
    for task, chosen in jobs:
        if interrupted_exit() is not None:
            break
        try:
            report = run_task(
                repo=workspace.repo,
                home=workspace.home,
                ledger=ledger,
                task=task,
                contract=chosen,
                sink=sink,
                keep_worktrees=keep_worktrees,
                stopped_by=actor,
            )
        except RunInterrupted as stop:
            display.ended()
            if stop.payload_path:
                with display.paused():
                    result(json.loads(Path(stop.payload_path).read_text(encoding="utf-8")))
            if stop.ask is not None:  # an operator stopped this run alone: the others go on
                unfinished.remove(task.id)
                _say_stopped(ledger, task.id, stop)
                code = max(code, EXIT_HELD)
                continue
            interrupted = (task.id, stop)
            break
        if stop_requested() is None:  # else its run ended as the stop came: it is stopped too
            unfinished.remove(task.id)
        else:
            ended.add(task.id)
        display.ended()
        payload = report.payload
        with display.paused():  # the result never shares a line with the live footer
            result(payload.to_json())
            if stream is not None or not json_output:
                _say_settled(chosen, report, err=stream is not None)
        code = max(code, exit_code_for(report.settlement.new_status, payload.halt_type))
    signum = stop_requested()
    if signum is not None:  # the user stopped this command: what it had yet to finish stays so
        from assay.cli.stopped import hold_stopped

        with display.paused():  # never on the live footer's line
            hold_stopped(ledger, unfinished, signum, actor, interrupted, ended)
            if interrupted is not None and interrupted[1].payload_path:
                typer.echo(f"payload: {interrupted[1].payload_path}", err=True)
    return code, (results if json_output else [])


def _say_settled(chosen: Contract, report: RunReport, *, err: bool) -> None:
    """The human summary of one run: its status and reason, what became of its task, the
    payload, and the task's wait when it waits."""
    from assay.cli.outcome import run_said, task_said

    payload, task = report.payload, report.task
    settled = task_said(
        task, spent=report.settlement.attempt_spent, max_attempts=chosen.budgets.max_attempts
    )
    typer.echo(
        f"{run_said(payload.status.value, payload.reason)}\n"
        f"task {task.id}: {settled}\n"
        f"payload: {report.payload_path or 'not written (see the warning above)'}",
        err=err,
    )
    finished = datetime.now(UTC)
    if task.waiting(finished):
        from assay.cli.explain import waits_message

        typer.echo(waits_message(task, finished), err=err)


def _say_stopped(ledger: Ledger, task_id: str, stop: RunInterrupted) -> None:
    """``task t…: stopped by alice (web); the run closed as interrupted … and the task is
    held: <reason>`` (an operator's request, ``assay task stop`` or the dashboard)."""
    from assay.cli.stopped import interrupted_line

    assert stop.ask is not None
    task = ledger.get_task(task_id)
    typer.echo(interrupted_line(ledger, task, stop, stop.ask.reason), err=True)
