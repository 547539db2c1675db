"""``assay contract init``: write a commented contract template."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from assay.cli.workspace import command_group, fail

app = command_group()


@app.command()
def init(
    path: Annotated[Path, typer.Argument(help="Where to write it.")] = Path("assay.yaml"),
    force: Annotated[bool, typer.Option(help="Overwrite an existing file.")] = False,
) -> None:
    """Write a commented dispatch contract template (every key explained)."""
    from assay.adapters.store.halt_files import write_text_atomic
    from assay.core.contract import contract_template

    if path.exists() and not force:
        fail(f"{path} exists; pass --force to overwrite it")
    if path.is_dir():
        fail(f"{path} is a directory; give the path of the file to write")
    try:
        write_text_atomic(path, contract_template())
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}")
    typer.echo(f"wrote {path}")


@app.command()
def check(path: Annotated[Path, typer.Argument(help="The contract to check.")]) -> None:
    """Parse and validate a contract; exit 2 with the key and line of the first problem.

    A contract that asks for the bwrap sandbox on a machine without bwrap is valid (it may be
    run elsewhere): a warning says `assay run` would refuse it here."""
    from assay.adapters.sandbox import bwrap_problem
    from assay.cli.run import load_contract_file
    from assay.core.vocab import SandboxMode

    contract = load_contract_file(path)
    if contract.sandbox is SandboxMode.BWRAP:
        problem = bwrap_problem()
        if problem is not None:
            typer.echo(f"warning: `assay run` would refuse this contract here: {problem}", err=True)
    typer.echo(f"{path}: ok")
