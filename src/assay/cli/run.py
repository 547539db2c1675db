"""``assay run``: run one task now, with live progress, and exit by what settle made of it.

Exit codes: 0 done, 1 failed (runnable again), 2 a bad invocation or contract, 3 held for a
human, 4 an internal error, 130 / 143 stopped by SIGINT / SIGTERM (the run closed as
interrupted, the task held until ``assay task release``: see :mod:`assay.cli.stopped`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from assay.cli.completion import task_ids
from assay.cli.flags import (
    ApiKeyEnvFlag,
    BaseUrlFlag,
    CoderCommandFlag,
    CoderFlag,
    ContractFlag,
    LandFlag,
    MaxAttemptsFlag,
    MaxCostFlag,
    MaxRecoveryFlag,
    MaxTokensFlag,
    ModelFlag,
    SandboxFlag,
    SeatsFlag,
    TaskMaxCostFlag,
    TaskMaxTokensFlag,
    ValidatorFlag,
)
from assay.cli.output_options import EventsFlag, ProgressFlag, ProgressMode
from assay.cli.signals import graceful_stop, interrupted_exit
from assay.cli.workspace import (
    EXIT_DONE,
    EXIT_FAILED,
    EXIT_HELD,
    EXIT_INTERNAL,
    Workspace,
    fail,
    one_line,
    refuse_secret_env,
    refuse_unconfinable,
    refuse_unrunnable,
)
from assay.core.vocab import HaltType, LandMode, SandboxMode, TaskStatus

if TYPE_CHECKING:
    from assay.adapters.store.sql import Ledger
    from assay.cli.event_stream import EventStream
    from assay.core.contract import Contract
    from assay.core.tasks import Task


def exit_code_for(status: TaskStatus, halt_type: HaltType) -> int:
    if halt_type is HaltType.INTERNAL_ERROR:
        return EXIT_INTERNAL
    if status is TaskStatus.DONE:
        return EXIT_DONE
    if status is TaskStatus.HELD:
        return EXIT_HELD
    return EXIT_FAILED


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


def refuse_conflicting_flags(
    instruction: str | None,
    contract: Path | None,
    task_id: str | None,
    ignore_wait: bool,
    resume: bool,
) -> None:
    """Flags that make no sense together are refused before anything happens."""
    from assay.core.contract import unstorable_text

    if ignore_wait and task_id is None:
        fail("--ignore-wait only applies to --task ID (a new task never waits)")
    if resume and (instruction is not None or contract is not None):
        fail(
            "--resume closes and reruns interrupted runs; start a new task with a separate "
            "`assay run` (or queue it with `assay task add`)"
        )
    if task_id is not None and (instruction is not None or contract is not None):
        fail("--task runs an existing task; give no instruction or --contract with it")
    if task_id is not None and unstorable_text(task_id) is not None:
        fail(f"no task {task_id!r}: the id is not valid text (see `assay task list`)")


def run(
    ctx: typer.Context,
    instruction: Annotated[
        str | None,
        typer.Argument(
            help="What to do. Omit it when --contract gives the task; given with --contract, "
            "it replaces the contract's `task:` (said on stderr)."
        ),
    ] = None,
    contract: ContractFlag = None,
    coder: CoderFlag = None,
    coder_command: CoderCommandFlag = None,
    model: ModelFlag = None,
    base_url: BaseUrlFlag = None,
    api_key_env: ApiKeyEnvFlag = None,
    validator: ValidatorFlag = None,
    land: LandFlag = LandMode.BRANCH,
    seats: SeatsFlag = 1,
    max_attempts: MaxAttemptsFlag = 3,
    max_recovery: MaxRecoveryFlag = 2,
    sandbox: SandboxFlag = None,
    max_cost: MaxCostFlag = None,
    max_tokens: MaxTokensFlag = None,
    task_max_cost: TaskMaxCostFlag = None,
    task_max_tokens: TaskMaxTokensFlag = None,
    task_id: Annotated[
        str | None,
        typer.Option(
            "--task", help="Run an existing task instead of a new one.", autocompletion=task_ids
        ),
    ] = None,
    ignore_wait: Annotated[
        bool,
        typer.Option(
            "--ignore-wait",
            help="With --task: run it now even if it waits for its provider quota.",
        ),
    ] = False,
    resume: Annotated[
        bool, typer.Option("--resume", help="Close runs a crash interrupted, then run them again.")
    ] = False,
    keep_worktrees: Annotated[
        bool,
        typer.Option(
            help="Keep the seat repositories (.assay/seats/<run>) after the run; without it a run"
            " that did not land keeps only its candidates' branches (assay gc removes both later)."
        ),
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print the payload as JSON.")] = False,
    events: EventsFlag = None,
    progress: ProgressFlag = ProgressMode.AUTO,
) -> None:
    """Run a task now: coders in seat repositories, validators decide, the task is settled.

    Give an instruction (and flags), or a contract file. The payload is written to
    .assay/runs/<run>/payload.json. Exit: 0 done, 1 failed, 2 bad input, 3 held, 4 internal,
    130/143 stopped by SIGINT/SIGTERM (the task is held: `assay task release ID` queues it).

    Before anything is queued it checks that this machine can run the task as set: every
    coder's and judge's program installed and visible inside the sandbox, every API key set,
    every validator's programs found, a clean base branch for --land merge. A problem is
    exit 2, one line each, and nothing is written.

    --events jsonl writes the ledger's events of the run to stdout as they happen, one JSON
    object a line (the dashboard's /events objects); --json then prints the payload as the
    last line, and the human summary goes to stderr.
    """
    from assay.cli.resume import stored_ledger
    from assay.engine.runner import recover_interrupted

    refuse_conflicting_flags(instruction, contract, task_id, ignore_wait, resume)
    spending = spending_flags(max_cost, max_tokens, task_max_cost, task_max_tokens)
    if task_id is not None or resume:  # a stored task's contract: a flag would be ignored
        given = flags_given(ctx, _CONTRACT_FLAGS)
        given += [flag for flag, key in SPENDING_FLAGS.items() if spending[key] is not None]
        if given:
            fail(
                f"{', '.join(given)} cannot be combined with --task or --resume: the task's "
                "contract sets these (give them when it is created)"
            )
    if contract is not None:
        refuse_flags_beside_a_contract(ctx)
    built: Contract | None = None
    if task_id is None and (instruction is not None or contract is not None):
        # A bad contract or option is refused before anything is created.
        built = build_contract(
            instruction, contract, coder, coder_command, validator, land, seats,
            max_attempts, max_recovery, sandbox=sandbox,
            spending=spending, endpoint=(model, base_url, api_key_env),
        )  # fmt: skip
        refuse_unconfinable(built)  # before the task is created
        refuse_secret_env(built)
        refuse_unrunnable(built)
    if built is None and task_id is None and not resume:
        fail("give an instruction, --contract FILE, --task ID or --resume (see assay run -h)")
    workspace = Workspace.find(require_commit=True)
    ledger = workspace.ledger() if built is not None else stored_ledger(workspace, task_id)
    # Taken before anything is written, so the stream starts with this command's first event.
    ours: set[str] = set()  # the tasks this command recovers or runs: the stream's events
    stream: EventStream | None = None
    if events is not None:
        from assay.cli.run_jobs import event_stream

        stream = event_stream(ledger, ours)
    now = datetime.now(UTC)
    jobs: list[tuple[Task, Contract]] = []
    recovered_code = EXIT_DONE
    if resume:
        from assay.cli.resume import recovered_exit, recovered_line

        recovered = recover_interrupted(
            repo=workspace.repo,
            home=workspace.home,
            ledger=ledger,
            contract_for=workspace.load_contract,
            warn=lambda line: typer.echo(f"assay: warning: {line}", err=True),
        )
        outcomes: list[Task] = []
        for run_id in recovered:
            record = ledger.get_run(run_id)
            task = ledger.get_task(record.task_id)
            outcomes.append(task)
            typer.echo(recovered_line(record, task, now), err=True)
            ours.add(task.id)
            if task.runnable(now):
                jobs.append((task, workspace.load_contract(task.id)))
        recovered_code = recovered_exit(outcomes)
        if not recovered and instruction is None and contract is None and task_id is None:
            typer.echo("no interrupted run to resume", err=True)
            raise typer.Exit(EXIT_DONE)
        if not jobs and instruction is None and contract is None and task_id is None:
            if stream is not None:
                stream.pump()  # what recovery wrote, before the exit says what it made of it
            raise typer.Exit(recovered_code)  # nothing left to run: what recovery made of it
    if task_id is not None:
        from assay.adapters.store.sql import TaskNotFound, UnreadableTask

        try:
            task = ledger.get_task(task_id)
        except UnreadableTask as exc:
            fail(str(exc), EXIT_INTERNAL)
        except TaskNotFound:
            fail(f"no task {task_id!r} (see `assay task list`)")
        if task.waiting(now) and not ignore_wait:
            from assay.cli.explain import waits_message

            fail(f"{waits_message(task, now)} (or add --ignore-wait)")
        if not task.runnable(now) and not task.waiting(now):
            from assay.cli.outcome import state_said

            fail(f"task {task_id} does not run now: it is {state_said(task.status, task_id)}")
        jobs.append((task, workspace.load_contract(task_id)))
    elif built is not None:
        if not built.verified:
            typer.echo(unverified_warning(built, contract is None), err=True)
        jobs.append((queue_task(ledger, built, now), built))
    for _, chosen in jobs:  # a stored task's contract (--task, --resume) too
        refuse_unconfinable(chosen)
        refuse_secret_env(chosen)
        if chosen is not built:
            refuse_unrunnable(chosen)
    ours.update(task.id for task, _ in jobs)

    from assay.cli.progress import progress_for
    from assay.cli.run_jobs import run_jobs

    display = progress_for(progress, streaming=stream is not None)
    with graceful_stop(notice=display.notice), display:
        if stream is None:
            code, results = run_jobs(workspace, ledger, jobs, keep_worktrees, display, json_output)
        else:
            with stream.following():
                code, results = run_jobs(
                    workspace, ledger, jobs, keep_worktrees, display, json_output, stream
                )
    for document in results:  # after the stream's last event: the result is the last line
        sys.stdout.write(json.dumps(document, separators=(",", ":"), default=str) + "\n")
    raise typer.Exit(interrupted_exit() or max(code, recovered_code))


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
_CONTRACT_FLAGS = {
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
    given = params_given(ctx, _CONTRACT_FLAGS)
    if given:
        flags = ", ".join(flag for flag, _ in given)
        keys = ", ".join(f"`{_CONTRACT_FLAGS[name]}`" for _, name in given)
        which = "it" if len(given) == 1 else "them"
        fail(
            f"{flags} cannot be combined with --contract: the contract file decides {which}, "
            f"written or by default (set {keys} in the file instead)"
        )


def queue_task(ledger: Ledger, contract: Contract, now: datetime) -> Task:
    """A new task for ``contract``, titled by its first line, added to the ledger together
    with its contract in one transaction: a task always has one, a failure leaves neither,
    and a worker on any machine can read it."""
    import secrets

    from assay.adapters.store.contracts import contract_document
    from assay.adapters.store.sql import LedgerConflict
    from assay.core.tasks import Task
    from assay.core.text import one_line_title

    title = one_line_title(contract.task)
    document = contract_document(contract)
    for _ in range(3):  # 32 random bits per second make a clash rare; a clash just draws again
        task_id = f"t{now:%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"
        task = Task.new(id=task_id, title=title, instruction=contract.task, now=now)
        try:
            ledger.add_task(task, contract=document)
        except LedgerConflict:
            continue  # the id is taken: never another task's
        return task
    fail("could not find a free task id after 3 tries", EXIT_INTERNAL)
