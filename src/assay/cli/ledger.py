"""``assay ledger show TASK``: every counter of a task, derived from its stage records."""

from __future__ import annotations

from typing import Annotated

import typer

from assay.cli.workspace import Workspace, command_group, fail, print_json

app = command_group()


@app.command()
def show(
    task_id: str,
    json_output: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """The task's convergence ledger: stage counters, laps, signatures, oscillation."""
    from assay.adapters.store.sql import TaskNotFound

    ledger = Workspace.find().ledger()
    try:
        convergence = ledger.ledger(task_id)
    except TaskNotFound:
        fail(f"no task {task_id!r} (see `assay task list`)")
    document = convergence.model_dump(mode="json")
    if json_output:
        print_json(document)
        return
    typer.echo(f"task {task_id}: {convergence.laps} lap(s), oscillating: {convergence.oscillating}")
    for stage, record in sorted(convergence.stage_state.items()):
        typer.echo(
            f"  {stage:<9} attempts {record.attempts:<4} last verdict {record.last_verdict.value}"
        )
    for name, foreign in sorted(convergence.foreign_stages.items()):
        unreadable = [s for s in foreign.last_finding_signatures if s.startswith("(unreadable")]
        why = unreadable[0] if unreadable else "not known to this version of assay"
        typer.echo(
            f"  {name:<9} attempts {foreign.attempts:<4} last verdict {foreign.last_verdict} "
            f"({why}; shown as stored, not counted)"
        )
