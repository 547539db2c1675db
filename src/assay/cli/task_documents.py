"""What ``assay task show --json`` and the operator moves' ``--json`` print: a task as the
ledger holds it, with its runs, usage and (when held) the fired halts its last run kept."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.cli import task_views as views
from assay.cli.workspace import Workspace, print_json

if TYPE_CHECKING:
    from assay.adapters.actor import Actor
    from assay.adapters.store.records import RunRecord
    from assay.adapters.store.sql import Ledger
    from assay.cli.usage_views import TaskUsage
    from assay.core.tasks import Task
    from assay.core.vocab import OperatorMove


def dump(task: Task) -> dict[str, object]:
    return task.model_dump(mode="json")


def task_usage(ledger: Ledger, task_id: str) -> TaskUsage:
    from assay.cli.usage_views import TaskUsage

    return TaskUsage.of(ledger.usage(task_id=task_id))


def show_document(
    ledger: Ledger,
    task: Task,
    runs: list[RunRecord],
    home: Path,
    now: datetime,
    usage: TaskUsage,
) -> dict[str, object]:
    """What ``task show --json`` prints, from the Ledger's models (a held task's fired halts
    from the payload the ledger keeps, so they show on any machine)."""
    runs_json = [r.model_dump(mode="json") for r in runs]
    kept = kept_payload(ledger, runs) if task.hold_source else None
    return views.show_document(task, dump(task), runs, runs_json, home, now, usage, kept)


def kept_payload(ledger: Ledger, runs: list[RunRecord]) -> dict[str, Any] | None:
    """The newest closed run's payload as the ledger keeps it; None when it keeps none or its
    row cannot be read (its payload file, when here, is then read instead)."""
    from assay.cli.explain_halts import newest_closed

    run = newest_closed(runs)
    document = ledger.run_document(run.id) if run is not None else None
    return document.payload if document is not None else None


def print_move(
    workspace: Workspace,
    ledger: Ledger,
    task: Task,
    move: OperatorMove,
    actor: Actor,
    reason: str | None,
) -> None:
    """An operator move's JSON: what was done, by whom, from where, why, and the task as
    ``task show --json`` prints it now."""
    runs, usage = ledger.runs(task.id), task_usage(ledger, task.id)
    shown = show_document(ledger, task, runs, workspace.home, datetime.now(UTC), usage)
    via = actor.via.value
    print_json({"action": move.value, "by": actor.by, "via": via, "reason": reason, "task": shown})
