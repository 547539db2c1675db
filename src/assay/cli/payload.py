"""``assay payload``: the halt payload's JSON Schema (and, with a ledger, a run's payload)."""

from __future__ import annotations

import json

import typer

app = typer.Typer(
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


@app.command()
def schema(
    pretty: bool = typer.Option(True, "--pretty/--compact", help="Indent the JSON (default)."),
) -> None:
    """Print the JSON Schema every payload (schema "assay.payload/1") validates against."""
    from assay.core.payload import payload_json_schema

    typer.echo(json.dumps(payload_json_schema(), indent=2 if pretty else None))
