"""How a run's outcome and its task's new state are said, in the README's words.

One wording for ``assay run``'s result lines, ``assay serve``'s line per run and ``task
show``'s runs: the run's status and reason (never a word twice: ``merged into main as one
commit, …``, not ``merged: merged into …``), then what became of the task (done, failed and
runnable again, held for a human) and its attempts used of ``max_attempts``, a refunded run
said as one that does not count. No internal name (a settle row, a Python value) is printed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from assay.core.text import shown
from assay.core.vocab import TaskStatus

if TYPE_CHECKING:
    from assay.core.tasks import Task
    from assay.engine.temporal.calls import RunOutcome


def run_said(status: str, reason: str | None) -> str:
    """``blocked: stuck: …``; a reason that begins with the status's own word is said alone
    (``merged into main as one commit, 1a2b3c4d5e6f``)."""
    said = shown(reason or "")
    if not said:
        return status
    first = said.split(maxsplit=1)[0].strip(":,;").lower()
    if first == status.lower():
        return said
    return f"{status}: {said}"


def task_said(task: Task, *, spent: bool, max_attempts: int | None = None) -> str:
    """``failed, runnable again (attempts: 1 of 3 used)``: the task's status after a run,
    whether the run counted, and where to look when it is held."""
    of = f" of {max_attempts}" if max_attempts is not None else ""
    used = f"attempts: {task.attempts}{of} used"
    if not spent:
        used = f"refunded, this run does not count; {used}"
    return state_said(task.status, task.id, f" ({used})")


def state_said(status: TaskStatus | str, task_id: str, note: str = "") -> str:
    """``failed, runnable again``, ``held for a human; `assay task show t…` says why …``:
    a task's status as the README says it, ``note`` right after the status's words."""
    words = _STATES.get(str(status), shown(str(status)))
    after = ""
    if status == TaskStatus.HELD:
        after = f"; `assay task show {task_id}` says why and what next"
    return f"{words}{note}{after}"


_STATES = {
    TaskStatus.DONE.value: "done",
    TaskStatus.FAILED.value: "failed, runnable again",
    TaskStatus.QUEUED.value: "queued, runnable again",
    TaskStatus.RUNNING.value: "running",
    TaskStatus.HELD.value: "held for a human",
}


def workflow_said(outcome: RunOutcome) -> str:
    """What a Temporal workflow came to (``serve --temporal``), in one line."""
    runs = f" (runs: {', '.join(outcome.runs)})" if outcome.runs else ""
    lost = f" ({outcome.lost} run(s) lost with their worker)" if outcome.lost else ""
    task = f"task {outcome.task_id}"
    if outcome.stopped:
        state = state_said(outcome.task_status or "unknown", outcome.task_id)
        return f"{task}: stopped ({shown(outcome.note)}); the task is {state}{runs}"
    if outcome.status is None:
        return f"{task}: {shown(outcome.note or 'nothing ran')}"
    state = state_said(outcome.task_status or "unknown", outcome.task_id)
    return f"{task}: the last run ended {outcome.status}{lost}; the task is {state}{runs}"
