"""``assay contract init | check``: write a commented contract template; check a contract.

With ``--json`` each prints one object on stdout (``contract_init`` and ``contract_check`` in
``schemas/cli.schema.json``); stderr and the exit codes are the same as without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from assay.cli.workspace import EXIT_USAGE, command_group, fail, print_json

if TYPE_CHECKING:
    from assay.core.contract import Contract
    from assay.core.contract_template import ToolFacts

app = command_group()

JsonFlag = Annotated[bool, typer.Option("--json", help="Print the outcome as one JSON object.")]


@app.command()
def init(
    path: Annotated[Path, typer.Argument(help="Where to write it.")] = Path("assay.yaml"),
    force: Annotated[bool, typer.Option(help="Overwrite an existing file.")] = False,
    json_output: JsonFlag = False,
) -> None:
    """Write a commented dispatch contract template (every key explained), its validators
    the ones found to run for this repository (pytest, ruff)."""
    from assay.adapters.store.halt_files import write_text_atomic
    from assay.core.contract import contract_template

    existed = path.exists()
    if existed and not force:
        fail(f"{path} exists; pass --force to overwrite it")
    if path.is_dir():
        fail(f"{path} is a directory; give the path of the file to write")
    text = contract_template(_found_tools(path))
    try:
        write_text_atomic(path, text)
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}")
    if json_output:
        print_json({"path": str(path), "bytes": len(text.encode()), "overwritten": existed})
    else:
        typer.echo(f"wrote {path}")


def _found_tools(path: Path) -> ToolFacts | None:
    """What runs for the repository the contract is written in (its folder's, outside git)."""
    import os

    from assay.adapters import git
    from assay.adapters.tool_detect import find_tools

    folder = path.absolute().parent
    if not folder.is_dir():
        return None  # nothing to look at: the write says why it cannot be made
    try:
        repo = git.repo_root(folder)
    except git.GitError:
        repo = folder
    return find_tools(repo, os.environ)


@app.command()
def check(
    path: Annotated[Path, typer.Argument(help="The contract to check.")],
    json_output: JsonFlag = False,
) -> None:
    """Parse and validate a contract; exit 2 with the key and line of the first problem.

    A contract that asks for the bwrap sandbox on a machine without bwrap is valid (it may be
    run elsewhere): a warning says `assay run` would refuse it here. --json: `{path, ok,
    problems: [{key, line, message}], warnings}`, the same exit codes."""
    from assay.core.text import printable

    shown = printable(str(path))
    contract, problems, refusal = _parse(path, shown)
    warnings = [] if contract is None else _warnings(contract)
    for warning in warnings:
        typer.echo(f"warning: {warning}", err=True)
    if json_output:
        document = {"path": shown, "ok": contract is not None, "problems": problems}
        print_json({**document, "warnings": warnings})
    if refusal is not None:
        fail(refusal, EXIT_USAGE)  # the same one line on stderr, with or without --json
    if not json_output:
        typer.echo(f"{shown}: ok")


def _parse(path: Path, shown: str) -> tuple[Contract | None, list[dict[str, object]], str | None]:
    """The contract, or None, every problem (key, line, message) and the one-line refusal."""
    from assay.cli.contract_file import ContractFileError, read_contract_text
    from assay.core.contract import ContractError, parse_contract

    try:
        text = read_contract_text(path)
    except ContractFileError as exc:
        message = f"cannot read contract {shown}: {exc}"
        return None, [{"key": None, "line": None, "message": message}], message
    try:
        return parse_contract(text, shown), [], None
    except ContractError as exc:
        problems: list[dict[str, object]] = [
            {"key": p.key or None, "line": p.line, "message": p.message} for p in exc.problems
        ]
        return None, problems, f"invalid contract: {exc}"


def _warnings(contract: Contract) -> list[str]:
    from assay.adapters.sandbox import bwrap_problem
    from assay.core.vocab import SandboxMode

    if contract.sandbox is not SandboxMode.BWRAP:
        return []
    problem = bwrap_problem()
    if problem is None:
        return []
    return [f"`assay run` would refuse this contract here: {problem}"]
