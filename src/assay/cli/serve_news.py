"""What ``assay serve`` says as it works, and the summary ``--json`` prints when it stops.

The queue worker's news goes to the progress display (above a live footer, or as plain
stderr lines) and is counted in a :class:`ServeSummary` at the same time, so the summary and
the lines never disagree. Light at import: the worker's classes are imported by
:func:`news` (the engine's worker module pulls in the store).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from assay.core.text import shown
from assay.core.vocab import EventKind

if TYPE_CHECKING:
    from assay.adapters.store.records import Event
    from assay.cli.progress import Progress
    from assay.core.tasks import Task
    from assay.engine.admission import Unrunnable
    from assay.engine.local.interrupt import RunInterrupted
    from assay.engine.local.runner import RunReport
    from assay.engine.worker import QueueEvents


@dataclass
class ServeSummary:
    """``serve --json``: what this serve did, by task (the ``serve_summary`` schema)."""

    runs: int = 0  # runs that closed, interrupted ones included
    closed: dict[str, str] = field(default_factory=dict)  # task id -> its status after its run
    interrupted: list[str] = field(default_factory=list)  # task ids
    skipped: list[dict[str, str]] = field(default_factory=list)  # {"task_id", "why"}
    recovered: list[str] = field(default_factory=list)  # run ids closed before work began
    stopped_by: str | None = None  # "SIGINT" / "SIGTERM"

    def stopped(self, signum: int | None) -> None:
        self.stopped_by = signal.Signals(signum).name if signum is not None else None

    def skip(self, task_id: str, why: str) -> None:
        """Once per task: a wait said again (a new reset time) replaces what it said before."""
        self.skipped = [s for s in self.skipped if s["task_id"] != task_id]
        self.skipped.append({"task_id": task_id, "why": why})

    def seen(self, event: Event) -> None:
        """Counted from the ledger (``serve --temporal``: the workers close the runs)."""
        if event.task_id is None:
            return
        if event.kind == EventKind.RUN_CLOSED:
            self.runs += 1
            status = event.data.get("task_status")
            if isinstance(status, str) and status:  # a TaskStatus value, as settle left it
                self.closed[event.task_id] = status
        elif event.kind == EventKind.RUN_INTERRUPTED:
            self.interrupted.append(event.task_id)

    def document(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "closed": dict(self.closed),
            "interrupted": list(self.interrupted),
            "skipped": [dict(s) for s in self.skipped],
            "recovered": list(self.recovered),
            "stopped_by": self.stopped_by,
        }


def news(display: Progress, summary: ServeSummary) -> QueueEvents[RunReport]:
    """The local worker's news: one line each on the display, and counted in ``summary``."""
    from assay.engine.worker import QueueEvents

    class Said(QueueEvents["RunReport"]):
        def recovered(self, run_id: str) -> None:
            summary.recovered.append(run_id)
            display.say(f"recovered interrupted run {run_id}")

        def unreadable(self, task_id: str, problem: str) -> None:
            summary.skip(task_id, f"unreadable: {problem}")
            display.say(f"skipping task {shown(task_id)}: unreadable: {shown(problem)}")

        def waiting(self, task: Task, now: datetime) -> None:
            from assay.cli.explain import waits_message

            said = waits_message(task, now)
            summary.skip(task.id, said)
            display.say(f"skipping: {shown(said)}")

        def finished(self, task_id: str, result: RunReport) -> None:
            from assay.cli.outcome import run_said, task_said

            summary.closed[task_id] = result.settlement.new_status.value
            ran = run_said(result.payload.status.value, result.payload.reason)
            settled = task_said(
                result.task,
                spent=result.settlement.attempt_spent,
                max_attempts=result.max_attempts,
            )
            display.say(f"task {task_id}: {ran}; the task is {settled}")

        def unrunnable(self, task_id: str, held: Unrunnable) -> None:
            summary.skip(task_id, f"held: {held}")
            display.say(f"{task_id}: not run, held: {shown(str(held))}")

        def interrupted(self, task_id: str, stop: RunInterrupted) -> None:
            summary.interrupted.append(task_id)
            if stop.ask is not None:  # an operator stopped this task's run: it is held
                display.say(
                    f"task {task_id}: {shown(str(stop))}; the run closed as interrupted "
                    f"(refunded) and the task is held: {shown(stop.ask.reason)}"
                )
                return
            display.say(  # as run's line says it; the queue stopped, not its task
                f"task {task_id}: {shown(str(stop))}; the run closed as interrupted (refunded, "
                "this run does not count) and the task is failed, runnable again"
            )

        def stopping(self) -> None:
            display.say("stopping: waiting for the runs in progress to close")

    return Said()
