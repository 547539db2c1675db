"""``assay payload``: the halt payload's JSON Schema (and, with a ledger, a run's payload)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from assay.cli.completion import RunId
from assay.cli.workspace import Workspace, command_group, fail, print_json

app = command_group()


@app.command()
def schema(
    pretty: bool = typer.Option(True, "--pretty/--compact", help="Indent the JSON (default)."),
) -> None:
    """Print the JSON Schema every payload (schema "assay.payload/1") validates against."""
    from assay.core.payload import payload_json_schema

    typer.echo(json.dumps(payload_json_schema(), indent=2 if pretty else None))


@app.command()
def show(
    run_id: RunId,
    json_output: Annotated[bool, typer.Option("--json", help="JSON output (the default).")] = True,
) -> None:
    """Print a run's payload, as the ledger keeps it (on any machine that reads the ledger);
    a run closed before the ledger kept payloads is read from the file it was written to."""
    from assay.adapters.store.sql import RunNotFound

    workspace = Workspace.find()
    ledger = workspace.existing_ledger()  # none yet: no run either, none created
    try:
        if ledger is None:
            raise RunNotFound(run_id)
        record = ledger.get_run(run_id)
        document = ledger.run_document(run_id)
    except RunNotFound:
        fail(f"no run {run_id!r}")
    if document is not None:
        print_json(document.payload)
        return
    if record.payload_path is None and not record.open:
        fail(f"run {run_id} closed ({record.status.value}) but its payload could not be written")
    if record.payload_path is None:
        from assay.cli.task_views import gone_runs, run_line

        said = run_line(record, gone_runs([record], workspace.home))
        fail(f"run {run_id} has no payload yet: it is {said}")
    try:
        print_json(json.loads(Path(record.payload_path).read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        fail(f"cannot read the payload of {run_id}: {exc}", 4)
