"""An operator's moves outside a run: hold, release, cancel, retry a task; re-arm a fired halt.

The CLI (``assay task hold|release|cancel``) and the dashboard's actions both come here, so a
move is checked by the task's own lifecycle and recorded the same way whoever made it: the
task and its ``task.saved`` event (with the action, who, from where and why) in one ledger
transaction, or a ``halt.rearmed`` event beside the re-armed state file.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.adapters.actor import Actor
from assay.adapters.store import halt_files, halt_ops
from assay.adapters.store.errors import LedgerConflict
from assay.core.tasks import Task, TaskTransitionError, how_to_stop
from assay.core.vocab import ActorVia, EventKind, OperatorMove, TaskStatus

if TYPE_CHECKING:
    from assay.adapters.store.sql import Ledger

__all__ = [
    "Actor",
    "ActorVia",
    "MoveRefused",
    "Moved",
    "OperatorMove",
    "RearmRefused",
    "move_task",
    "rearm_halt",
]

HOLD_REASON = "held by an operator"
CANCEL_REASON = "cancelled by an operator"
RELEASED_NOTE = " (attempts reset to 0; run history kept)"
_FAILED = frozenset({TaskStatus.FAILED})


@dataclass(frozen=True)
class Moved:
    """The task as saved, and what to add after its status when saying so ("" or a note)."""

    task: Task
    note: str


class MoveRefused(Exception):
    """The move is not allowed now; ``str(exc)`` says why, for the person who asked."""


class RearmRefused(Exception):
    """The halt was not re-armed (nothing written); ``str(exc)`` says why."""


def move_task(
    ledger: Ledger,
    task_id: str,
    move: OperatorMove,
    *,
    actor: Actor,
    now: datetime,
    reason: str | None = None,
) -> Moved:
    """Apply ``move`` to the task as the ledger holds it at this moment and record it.

    Raises the store's ``TaskNotFound`` / ``UnreadableTask``, or ``MoveRefused`` with the
    lifecycle's explanation (a running task, a release of a task not held, ...). The read,
    the move and the write are one transaction under the task's lock, so a move racing a run
    start either lands before it (the run then sees the new status) or is refused.
    """
    notes: list[str] = []

    def apply(task: Task) -> dict[str, Any]:
        said = _apply(task, move, now, reason)
        notes.append(said[0])
        return {"action": move.value, "by": actor.by, "via": actor.via.value, "reason": said[1]}

    try:
        task = ledger.change_task(task_id, apply)
    except TaskTransitionError as exc:
        raise MoveRefused(refusal(move, exc)) from exc
    except LedgerConflict as exc:  # a run claimed the task in between: nothing was written
        raise MoveRefused(f"cannot {_VERBS[move][0]} task {task_id!r} now: {exc}") from exc
    return Moved(task=task, note=notes[-1])


# Each move as the operator asked for it, and said done: the refusal speaks of that move.
_VERBS = {
    OperatorMove.HOLD: ("hold", "held"),
    OperatorMove.RELEASE: ("release", "released"),
    OperatorMove.CANCEL: ("cancel", "cancelled"),
    OperatorMove.RETRY: ("retry", "retried"),
}


def refusal(move: OperatorMove, exc: TaskTransitionError) -> str:
    """``cannot cancel task 't1': it is done, and only a queued or failed task can be
    cancelled``: the move asked for, the task's status, and what would allow it."""
    verb, past = _VERBS[move]
    allowed = " or ".join(sorted(exc.allowed))
    if move is OperatorMove.RELEASE:
        allowed = "held task, or a queued or failed one that waits for its quota,"
    else:
        allowed += " task"
    said = f"cannot {verb} task {exc.task_id!r}: it is {exc.status}, and only a {allowed} can be"
    said += f" {past}"
    if exc.status is TaskStatus.HELD:
        said += f" (it is held already: `assay task release {exc.task_id}` lets it run again)"
    elif exc.status is TaskStatus.RUNNING:
        said += f" (its run settles it; stop the run first: {how_to_stop(exc.task_id)})"
    return said


def _apply(
    task: Task, move: OperatorMove, now: datetime, reason: str | None
) -> tuple[str, str | None]:
    """The lifecycle move itself; returns the note to print and the reason recorded."""
    if move is OperatorMove.RETRY:  # a failed task runs now: its wait cleared, attempts kept
        if task.status is not TaskStatus.FAILED:
            raise TaskTransitionError(task.id, "retry", task.status, _FAILED)
        task.skip_wait(now)
        return f" (runnable now; attempts kept: {task.attempts})", reason
    if move is OperatorMove.RELEASE:
        if task.status is TaskStatus.HELD:
            task.release(now)
            return RELEASED_NOTE, reason
        if task.waiting(now):
            task.skip_wait(now)
            return f" (its wait is cleared; attempts kept: {task.attempts})", reason
        task.release(now)  # refused, with the lifecycle's own explanation
        return RELEASED_NOTE, reason
    default = HOLD_REASON if move is OperatorMove.HOLD else CANCEL_REASON
    given = reason.strip() if reason else ""
    chosen = given or default
    task.hold(chosen, now)
    done = "cancelled" if move is OperatorMove.CANCEL else "a manual hold"
    return f" ({done}: `assay task release {task.id}` lets it run again)", chosen


def rearm_halt(
    ledger: Ledger,
    *,
    state_dir: Path,
    run_id: str,
    condition: str,
    evidence: str,
    actor: Actor,
    now: datetime,
) -> dict[str, Any]:
    """Re-arm the fired (or checked) halt ``condition`` of the run's dispatch, with evidence
    of the remedy, and journal it as ``halt.rearmed``; returns the halt command's document.

    Raises the store's ``RunNotFound`` for an unknown run, and ``RearmRefused`` (nothing
    written) when the evidence is blank, the dispatch's state file is not on this machine, or
    the halt command refuses (its violations say why).
    """
    if not evidence.strip():
        raise RearmRefused("re-arming a halt needs evidence that its cause was remedied")
    run = ledger.get_run(run_id)
    dispatch = run.dispatch_id or run.id
    if not halt_files.valid_dispatch_id(dispatch):
        raise RearmRefused(f"run {run_id!r} has no halt state file (dispatch {dispatch!r})")
    path = halt_files.state_path(state_dir, dispatch)
    if not path.is_file():
        raise RearmRefused(
            f"the halt state file of run {run_id!r} is not on this machine ({path}); "
            "re-arm it where the run ran"
        )
    at = now.isoformat(timespec="microseconds").replace("+00:00", "Z")
    document, code = halt_ops.rearm(dispatch, condition, state_dir, evidence=evidence, now=at)
    if code != 0:
        violations = document.get("violations") or []
        details = [str(v.get("detail", v)) for v in violations if isinstance(v, dict)]
        raise RearmRefused("; ".join(details) or f"{condition} was not re-armed")
    data = {
        "dispatch_id": dispatch,
        "condition": condition,
        "evidence": evidence,
        "by": actor.by,
        "via": actor.via.value,
    }
    ledger.append_event(EventKind.HALT_REARMED, data, at=now, task_id=run.task_id, run_id=run.id)
    return document
