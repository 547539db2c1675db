"""``assay schema [NAME] [--list]``: the JSON Schema of what each command prints with ``--json``.

The schema ships with assay (``assay/schemas/cli.schema.json``, the repository's
``schemas/cli.schema.json``), so a tool reading assay's output can validate it against the
version it talks to. Always JSON.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Annotated, Any

import typer

from assay.cli.workspace import fail

SCHEMA_FILE = "cli.schema.json"


def cli_schema() -> dict[str, Any]:
    """The CLI schema as shipped with this assay."""
    loaded: dict[str, Any] = json.loads(
        files("assay.schemas").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    )
    return loaded


def output_names(incomplete: str) -> list[str]:
    """The entries ``--list`` names (the commands' outputs): what a shell completes."""
    definitions: dict[str, Any] = cli_schema().get("$defs", {})
    return [
        name
        for name, entry in definitions.items()
        if entry.get("description") and name.startswith(incomplete)
    ]


def schema(
    name: Annotated[
        str | None,
        typer.Argument(
            help="One output's entry (e.g. task_show, event, serve_summary): printed as a schema "
            "of its own that validates that command's stdout. Omit it for the whole schema.",
            autocompletion=output_names,
        ),
    ] = None,
    list_names: Annotated[
        bool, typer.Option("--list", help="Print each entry's name and what prints it.")
    ] = False,
    pretty: bool = typer.Option(True, "--pretty/--compact", help="Indent the JSON (default)."),
) -> None:
    """Print the JSON Schema of every command's --json output (one $defs entry per output)."""
    document = cli_schema()
    definitions: dict[str, Any] = document.get("$defs", {})
    if list_names and name is not None:
        fail("--list names every entry; give no NAME with it")
    if list_names:  # the outputs: the entries that say which command prints them
        shown: object = {
            key: entry["description"]
            for key, entry in definitions.items()
            if entry.get("description")
        }
    elif name is None:
        shown = document
    elif name not in definitions:
        fail(f"no schema entry {name!r}: `assay schema --list` names them")
    else:
        # The entry with every definition beside it, so its $refs resolve on their own.
        shown = {
            "$schema": document.get("$schema"),
            "$id": f"{document.get('$id', '')}#{name}",
            "description": definitions[name].get("description", ""),
            "$ref": f"#/$defs/{name}",
            "$defs": definitions,
        }
    typer.echo(json.dumps(shown, indent=2 if pretty else None, ensure_ascii=False))
