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

DEFAULT_PATH = Path("assay.yaml")
"""Where ``init`` writes the template and what ``check`` reads when given no path."""

JsonFlag = Annotated[bool, typer.Option("--json", help="Print the outcome as one JSON object.")]


@app.command()
def init(
    path: Annotated[Path, typer.Argument(help="Where to write it.")] = DEFAULT_PATH,
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
    path: Annotated[
        Path | None,
        typer.Argument(help="The contract to check (default: assay.yaml, as `init` writes it)."),
    ] = None,
    json_output: JsonFlag = False,
) -> None:
    """Parse and validate a contract; exit 2 with the key and line of the first problem.

    The template's placeholder task, left unchanged, is a problem too (`assay run` refuses
    it). A contract that asks for the bwrap sandbox on a machine without bwrap is valid (it
    may be run elsewhere): a warning says `assay run` would refuse it here. --json: `{path,
    ok, problems: [{key, line, message}], warnings}`, the same exit codes."""
    from assay.core.text import printable

    default = path is None
    path = DEFAULT_PATH if path is None else path
    shown = printable(str(path))
    contract, problems, refusal = _parse(path, shown)
    if default and not path.exists() and not path.is_symlink():
        refusal = (
            f"no {DEFAULT_PATH} here; create one with `assay contract init` or give a path "
            "(`assay contract check FILE`)"
        )
        problems = [{"key": None, "line": None, "message": refusal}]
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
    from assay.core.contract_yaml import placeholder_problem

    try:
        text = read_contract_text(path)
    except ContractFileError as exc:
        message = f"cannot read contract {shown}: {exc}"
        return None, [{"key": None, "line": None, "message": message}], message
    try:
        contract = parse_contract(text, shown)
    except ContractError as exc:
        problems: list[dict[str, object]] = [
            {"key": p.key or None, "line": p.line, "message": p.message} for p in exc.problems
        ]
        return None, problems, f"invalid contract: {exc}"
    problem = placeholder_problem(contract.task)
    if problem is None:
        return contract, [], None
    # A top-level key in block style starts its line (a flow-style contract has no line).
    lines = text.splitlines()
    line = next((n for n, s in enumerate(lines, 1) if s.startswith(("task:", "task :"))), None)
    where = f"line {line}: task" if line is not None else "task"
    refusal = f"invalid contract: {shown}: {where}: {problem}"
    return None, [{"key": "task", "line": line, "message": problem}], refusal


def _warnings(contract: Contract) -> list[str]:
    from assay.adapters.sandbox import bwrap_problem
    from assay.core.vocab import SandboxMode

    if contract.sandbox is not SandboxMode.BWRAP:
        return []
    problem = bwrap_problem()
    if problem is None:
        return []
    return [f"`assay run` would refuse this contract here: {problem}"]
