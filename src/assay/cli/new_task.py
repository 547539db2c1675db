"""The contract of a new task, from a contract file or from the flags, and the task queued
for it: what ``assay run`` and ``assay task add`` share, each flag refused where it cannot
apply (beside ``--contract``, a placeholder task, a budget out of bounds)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from assay.cli.workspace import EXIT_INTERNAL, fail, one_line
from assay.core.vocab import SandboxMode

if TYPE_CHECKING:
    from assay.adapters.store.sql import Ledger
    from assay.core.contract import Contract
    from assay.core.tasks import Task


def load_contract_file(path: Path) -> Contract:
    from assay.cli.contract_file import ContractFileError, read_contract_text
    from assay.core.contract import ContractError, parse_contract
    from assay.core.text import printable

    try:
        text = read_contract_text(path)
    except ContractFileError as exc:
        fail(f"cannot read contract {printable(str(path))}: {exc}")
    try:
        return parse_contract(text, printable(str(path)))
    except ContractError as exc:
        fail(f"invalid contract: {exc}")


def unverified_warning(contract: Contract, from_flags: bool) -> str:
    """The one line said before a run that no validator will verify; what that does to the
    landing only when the landing is a merge."""
    from assay.core.vocab import LandMode

    missing = (
        "no --validator given"
        if from_flags
        else "the contract has no command or judge validator that can block"
    )
    landing = ""
    if contract.land is LandMode.MERGE and contract.land_unverified:
        landing = "; land_unverified: true lets the merge land it anyway"
    elif contract.land is LandMode.MERGE:
        how = "give --validator" if from_flags else "add a validator, or land_unverified: true"
        landing = f"; the merge will leave the change on a branch instead ({how} to merge it)"
    return (
        f"warning: {missing}: only scope and secret checks will run, nothing verifies the "
        f"change (halt-verification-gap){landing}"
    )


def build_contract(
    instruction: str | None,
    contract_file: Path | None,
    coder: str | None,
    coder_command: str | None,
    validators: list[str] | None,
    land: str,
    seats: int,
    max_attempts: int,
    max_recovery: int,
    *,
    sandbox: SandboxMode | None = None,
    spending: Mapping[str, float | int | None] | None = None,
    endpoint: tuple[str | None, str | None, str | None] = (None, None, None),
) -> Contract:
    """The contract of a new task, from a file or from the flags; ``sandbox`` (``--sandbox``)
    and ``spending`` (the budget flags, by their ``budgets`` key) override either's;
    ``endpoint`` is ``--model``, ``--base-url`` and ``--api-key-env``."""
    from pydantic import ValidationError

    from assay.cli.coder_flags import CoderFlags, checked_coder
    from assay.core.contract import contract_from_flags
    from assay.core.contract_yaml import placeholder_problem
    from assay.core.text import printable

    if contract_file is not None:
        built = load_contract_file(contract_file)
        if instruction is not None and instruction.strip() != built.task.strip():
            from assay.core.text import shown

            typer.echo(
                "assay: note: the instruction given replaces the `task:` of "
                f"{shown(str(contract_file))}",
                err=True,
            )
            built = built.model_copy(update={"task": instruction})
        if (problem := placeholder_problem(built.task)) is not None:
            fail(f"invalid contract: {printable(str(contract_file))}: task: {problem}")
    else:
        assert instruction is not None
        model, base_url, api_key_env = endpoint
        flags = CoderFlags(coder, coder_command, model, base_url, api_key_env)
        kind, chosen_model = checked_coder(flags)
        try:
            built = contract_from_flags(
                instruction,
                coder=kind.value,
                coder_command=coder_command,
                model=chosen_model,
                base_url=base_url,
                api_key_env=api_key_env,
                validators=validators or [],
                land=land,
                seats=seats,
                judges=0,
                max_attempts=max_attempts,
                max_recovery=max_recovery,
                policy="unanimous",
                scope_allow=None,
                scope_protect=None,
            )
        except ValidationError as exc:
            fail(f"invalid options: {one_line(exc)}")
        except ValueError as exc:
            fail(f"invalid options: {exc}")
        if (problem := placeholder_problem(built.task)) is not None:
            fail(f"invalid options: the instruction: {problem}")
    if sandbox is not None:
        built = built.model_copy(update={"sandbox": sandbox})
    caps = {key: value for key, value in (spending or {}).items() if value is not None}
    if caps:
        try:
            budgets = type(built.budgets).model_validate({**built.budgets.model_dump(), **caps})
        except ValidationError as exc:
            error = exc.errors()[0]
            key = str(error["loc"][0]) if error["loc"] else ""
            flag = {v: k for k, v in SPENDING_FLAGS.items()}.get(key, key)
            fail(f"invalid options: {flag}: {error['msg'].lower()} (got {error['input']!r})")
        built = built.model_copy(update={"budgets": budgets})
    return built


# The budget flags and the contract keys they set.
SPENDING_FLAGS = {
    "--max-cost": "max_cost_usd",
    "--max-tokens": "max_tokens",
    "--task-max-cost": "task_max_cost_usd",
    "--task-max-tokens": "task_max_tokens",
}


def spending_flags(
    max_cost: float | None,
    max_tokens: int | None,
    task_max_cost: float | None,
    task_max_tokens: int | None,
) -> dict[str, float | int | None]:
    """The budget flags by the contract keys they set."""
    given = (max_cost, max_tokens, task_max_cost, task_max_tokens)
    return dict(zip(SPENDING_FLAGS.values(), given, strict=True))


# The flags a contract file sets itself (given beside --contract they would be ignored), and
# the contract key each one sets.
CONTRACT_FLAGS = {
    "coder": "coder:",
    "coder_command": "coder.command",
    "model": "coder.model",
    "base_url": "coder.base_url",
    "api_key_env": "coder.api_key_env",
    "validator": "validators:",
    "land": "land:",
    "seats": "seats:",
    "max_attempts": "budgets.max_attempts",
    "max_recovery": "budgets.max_recovery",
}


def params_given(ctx: typer.Context, names: Collection[str]) -> list[tuple[str, str]]:
    """The parameters among ``names`` given on the command line: (flag, parameter name)."""
    return [
        (param.opts[0], param.name)
        for param in ctx.command.params
        if param.name in names
        and (source := ctx.get_parameter_source(param.name)) is not None
        and source.name == "COMMANDLINE"
    ]


def flags_given(ctx: typer.Context, names: Collection[str]) -> list[str]:
    """The flags among ``names`` (parameter names) given on the command line."""
    return [flag for flag, _ in params_given(ctx, names)]


def refuse_flags_beside_a_contract(ctx: typer.Context) -> None:
    """A flag the contract file would override is refused, never silently ignored."""
    given = params_given(ctx, CONTRACT_FLAGS)
    if given:
        flags = ", ".join(flag for flag, _ in given)
        keys = ", ".join(f"`{CONTRACT_FLAGS[name]}`" for _, name in given)
        which = "it" if len(given) == 1 else "them"
        fail(
            f"{flags} cannot be combined with --contract: the contract file decides {which}, "
            f"written or by default (set {keys} in the file instead)"
        )


def queue_task(ledger: Ledger, contract: Contract, now: datetime, *, repo: Path) -> Task:
    """A new task for ``contract``, titled by its first line, added to the ledger together
    with its contract in one transaction: a task always has one, a failure leaves neither,
    and a worker on any machine can read it. It records the repository ``repo`` is (only
    that repository's workers run it) and the branch checked out there (its target)."""
    import secrets

    from assay.adapters.store.contracts import contract_document
    from assay.adapters.store.sql import LedgerConflict
    from assay.cli.task_place import placement
    from assay.core.tasks import Task
    from assay.core.text import one_line_title

    repository, branch = placement(repo)
    title = one_line_title(contract.task)
    document = contract_document(contract)
    for _ in range(3):  # 32 random bits per second make a clash rare; a clash just draws again
        task_id = f"t{now:%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"
        task = Task.new(
            id=task_id,
            title=title,
            instruction=contract.task,
            now=now,
            repository=repository,
            branch=branch,
        )
        try:
            ledger.add_task(task, contract=document)
        except LedgerConflict:
            continue  # the id is taken: never another task's
        return task
    fail("could not find a free task id after 3 tries", EXIT_INTERNAL)
