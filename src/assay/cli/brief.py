"""``assay brief --contract FILE [--kind KIND] [--json]``: print what the agent is told."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from assay.core.vocab import CoderKind


def brief(
    contract: Annotated[Path, typer.Option("--contract", help="The dispatch contract YAML.")],
    kind: Annotated[
        CoderKind | None,
        typer.Option(
            "--kind", help="Render it for this coder kind (default: the contract's first coder)."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="The brief as JSON: its rules as data, and its text.")
    ] = False,
) -> None:
    """Print the brief a coder is given: the task, the scope, every armed halt with the exact
    command that fires it, the report file and the NO CHANGE NEEDED protocol."""
    from assay.cli.new_task import load_contract_file
    from assay.core.brief import brief_document, render_brief

    parsed = load_contract_file(contract)  # exit 2 with the key and line of a bad contract
    chosen = kind or parsed.coder_for_seat(1).kind
    text = render_brief(parsed, chosen)
    if as_json:
        document = {**brief_document(parsed, chosen), "text": text}
        typer.echo(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        typer.echo(text, nl=False)
