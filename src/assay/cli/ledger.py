"""``assay ledger show TASK``: every counter of a task, derived from its stage records."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from assay.cli import task_views as views
from assay.cli.workspace import Workspace, command_group, fail, print_json

app = command_group()


@app.command()
def show(
    task_id: str,
    json_output: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """The task's convergence ledger: stage counters, laps, signatures, oscillation."""
    from assay.adapters.store.sql import TaskNotFound

    try:
        convergence = Workspace.find().ledger().ledger(task_id)
    except TaskNotFound:
        fail(f"no task {task_id!r} (see `assay task list`)")
    document = convergence.model_dump(mode="json")
    if json_output:
        print_json(document)
    else:
        sys.stdout.write(views.ledger_text(document))
