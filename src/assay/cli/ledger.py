"""``assay ledger show TASK``: every counter of a task, derived from its stage records, and
what its runs spent (the usage journal's sums)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from assay.cli import task_views as views
from assay.cli.completion import TaskId
from assay.cli.workspace import Workspace, command_group, fail, print_json

app = command_group()


@app.command()
def show(
    task_id: TaskId,
    json_output: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """The task's convergence ledger: stage counters, laps, signatures, oscillation; and what
    its runs spent (tokens, cost or unknown)."""
    from assay.adapters.store.sql import TaskNotFound
    from assay.cli.usage_views import TaskUsage

    ledger = Workspace.find().existing_ledger()  # none yet: no task either, none created
    try:
        if ledger is None:
            raise TaskNotFound(task_id)
        convergence = ledger.ledger(task_id)
    except TaskNotFound:
        fail(f"no task {task_id!r} (see `assay task list`)")
    usage = TaskUsage.of(ledger.usage(task_id=task_id))
    document = {**convergence.model_dump(mode="json"), "usage": usage.as_json()}
    if json_output:
        print_json(document)
    else:
        sys.stdout.write(views.ledger_text(document, usage))
