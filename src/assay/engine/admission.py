"""Before a queued task runs here: the preflight, and a hold when this machine cannot run it.

A worker (``assay serve``, a Temporal worker opening a run) checks a task's settings against
this machine with the one preflight (:func:`assay.adapters.preflight.check`: programs on the
PATH and visible inside the sandbox, API keys set). A task that fails it is held (machine)
with the problems as its reason and never started: a missing program or key is the
operator's setting, not a machine fault, so nothing refunds or retries it; the operator fixes
the setting and releases the task. The state of the checkout (a dirty base for ``land:
merge``) is not a setting and is left to the landing, which never touches a dirty checkout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

from assay.adapters import preflight
from assay.adapters.store.errors import LedgerConflict
from assay.adapters.store.sql import Ledger
from assay.core.contract import Contract
from assay.core.preflight import unrunnable_reason
from assay.core.tasks import RUNNABLE_STATUSES, Task

__all__ = ["Unrunnable", "admit", "hold_reason", "hold_unrunnable"]


class Unrunnable(Exception):
    """The task's settings cannot run on this machine: it was held with ``problems``."""

    def __init__(self, task: Task, problems: Sequence[str]) -> None:
        super().__init__(hold_reason(problems))
        self.task = task
        self.problems = list(problems)


def hold_reason(problems: Sequence[str]) -> str:
    """The hold reason of a task this machine cannot run: every problem, in one line."""
    return unrunnable_reason(problems)


def admit(
    *,
    ledger: Ledger,
    task: Task,
    contract: Contract,
    repo: Path,
    home: Path,
    now: datetime,
    env: Mapping[str, str] | None = None,
) -> None:
    """Check ``task``'s ``contract`` against this machine; when it cannot run here, hold the
    task (machine) with the problems and raise :class:`Unrunnable`."""
    problems = preflight.check(contract, repo=repo, home=home, env=env, landing=False)
    if problems:
        raise Unrunnable(hold_unrunnable(ledger, task.id, problems, now), problems)


def hold_unrunnable(ledger: Ledger, task_id: str, problems: Sequence[str], now: datetime) -> Task:
    """Hold the task (machine) with the problems, as the ledger holds it now. A run that
    claimed it meanwhile, or an operator who moved it, wins: the store's ``LedgerConflict``,
    which a worker takes as "someone else has it", and nothing is written."""
    reason = hold_reason(problems)

    def hold(task: Task) -> dict[str, str]:
        if task.status not in RUNNABLE_STATUSES:
            raise LedgerConflict(f"task {task.id!r} is {task.status.value} now")
        task.cannot_run(reason, now)
        return {"reason": reason, "by": "preflight"}

    return ledger.change_task(task_id, hold)
