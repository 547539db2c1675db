"""``assay task add | list | show | hold | release | cancel``: the queue of tasks."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from assay.cli import task_views as views
from assay.cli.flags import (
    CoderCommandFlag,
    CoderFlag,
    ContractFlag,
    LandFlag,
    MaxAttemptsFlag,
    MaxCostFlag,
    MaxRecoveryFlag,
    MaxTokensFlag,
    SandboxFlag,
    SeatsFlag,
    TaskMaxCostFlag,
    TaskMaxTokensFlag,
    ValidatorFlag,
)
from assay.cli.workspace import (
    EXIT_INTERNAL,
    EXIT_USAGE,
    Workspace,
    command_group,
    fail,
    print_json,
    refuse_secret_env,
    refuse_unconfinable,
    refuse_unrunnable,
)
from assay.core.vocab import OperatorMove

if TYPE_CHECKING:
    from assay.adapters.store.records import RunRecord
    from assay.adapters.store.sql import Ledger
    from assay.cli.usage_views import TaskUsage
    from assay.core.tasks import Task
    from assay.engine.operator import Actor

app = command_group()

HOLD_REASON = "held by an operator"
_STOP_REASONS = {OperatorMove.HOLD: HOLD_REASON, OperatorMove.CANCEL: "cancelled by an operator"}

JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]


def _get(ledger: Ledger, task_id: str) -> Task:
    from assay.adapters.store.sql import TaskNotFound, UnreadableTask
    from assay.core.contract import unstorable_text

    if unstorable_text(task_id) is not None:
        fail(f"no task {task_id!r}: the id is not valid text (see `assay task list`)")
    try:
        return ledger.get_task(task_id)
    except UnreadableTask as exc:
        fail(str(exc), EXIT_INTERNAL)
    except TaskNotFound:
        fail(f"no task {task_id!r} (see `assay task list`)")


def _dump(task: Task) -> dict[str, object]:
    return task.model_dump(mode="json")


@app.command()
def add(
    ctx: typer.Context,
    instruction: Annotated[str | None, typer.Argument(help="What to do.")] = None,
    contract: ContractFlag = None,
    coder: CoderFlag = None,
    coder_command: CoderCommandFlag = None,
    validator: ValidatorFlag = None,
    land: LandFlag = "branch",
    seats: SeatsFlag = 1,
    max_attempts: MaxAttemptsFlag = 3,
    max_recovery: MaxRecoveryFlag = 2,
    sandbox: SandboxFlag = None,
    max_cost: MaxCostFlag = None,
    max_tokens: MaxTokensFlag = None,
    task_max_cost: TaskMaxCostFlag = None,
    task_max_tokens: TaskMaxTokensFlag = None,
    no_check: Annotated[
        bool,
        typer.Option(
            "--no-check",
            help="Queue it without checking that this machine can run it (the sandbox, its "
            "coders' and judges' programs and API keys, its validators' programs): for a "
            "worker on another machine, which checks it when it runs.",
        ),
    ] = False,
    json_output: JsonFlag = False,
) -> None:
    """Queue a task (an instruction with flags, or a contract) for `assay serve`.

    Like `assay run`, it first checks that this machine can run the task as set: every coder's
    and judge's program is installed and visible inside the sandbox, every API key they read
    is set, every command validator's programs are found. A problem is refused, exit 2, one
    line each, and nothing is queued (--no-check skips this; `assay serve` still checks, and
    holds a task it cannot run)."""
    from assay.cli.run import (
        build_contract,
        queue_task,
        refuse_flags_beside_a_contract,
        spending_flags,
    )

    if instruction is None and contract is None:
        fail("give an instruction or --contract FILE")
    if contract is not None:
        refuse_flags_beside_a_contract(ctx)
    built = build_contract(
        instruction, contract, coder, coder_command, validator, land, seats,
        max_attempts, max_recovery, sandbox=sandbox,
        spending=spending_flags(max_cost, max_tokens, task_max_cost, task_max_tokens),
    )  # fmt: skip
    refuse_secret_env(built)
    if not no_check:  # the checkout's state is the run's to check, when it runs
        refuse_unconfinable(built)
        refuse_unrunnable(built, landing=False)
    workspace = Workspace.find(require_commit=True)
    task = queue_task(workspace.ledger(), built, datetime.now(UTC))
    if json_output:
        print_json(_dump(task))
    else:
        typer.echo(f"queued {task.id}: {task.title}")


@app.command("list")
def list_tasks(
    status: Annotated[str | None, typer.Option(help="Only tasks with this status.")] = None,
    json_output: JsonFlag = False,
) -> None:
    """List tasks, oldest first, with status, attempts and why a task waits or is held."""
    from assay.core.vocab import TaskStatus

    chosen = None
    if status is not None:
        try:
            chosen = TaskStatus(status)
        except ValueError:
            fail(f"unknown status {status!r}: use one of {', '.join(s.value for s in TaskStatus)}")
    now = datetime.now(UTC)
    tasks, unreadable = Workspace.find().ledger().scan_tasks(chosen)
    if json_output:
        print_json(
            [_dump(t) for t in tasks]
            + [{"id": i, "status": "unreadable", "problem": why} for i, why in unreadable]
        )
        return
    sys.stdout.write(views.list_text(tasks, unreadable, now))


@app.command()
def show(task_id: str, json_output: JsonFlag = False) -> None:
    """One task: status, attempts, runs, any wait, and — when held — why, by whom, and the
    ways back (re-arm a fired halt, release)."""
    now = datetime.now(UTC)
    workspace = Workspace.find()
    ledger = workspace.ledger()
    task = _get(ledger, task_id)
    records = ledger.runs(task_id)
    usage = _usage(ledger, task_id)
    document = _show_document(task, records, workspace.home, now, usage)
    if json_output:
        print_json(document)
    else:
        sys.stdout.write(views.show_text(task, records, document, now, usage))


def _usage(ledger: Ledger, task_id: str) -> TaskUsage:
    from assay.cli.usage_views import TaskUsage

    return TaskUsage.of(ledger.usage(task_id=task_id))


def _show_document(
    task: Task, runs: list[RunRecord], home: Path, now: datetime, usage: TaskUsage
) -> dict[str, object]:
    """What ``task show --json`` prints, from the Ledger's models."""
    runs_json = [r.model_dump(mode="json") for r in runs]
    return views.show_document(task, _dump(task), runs, runs_json, home, now, usage)


def _move(
    task_id: str, move: OperatorMove, reason: str | None = None, *, json_output: bool = False
) -> None:
    import contextlib

    from assay.adapters.actor import cli_actor
    from assay.engine.operator import MoveRefused, move_task

    workspace = Workspace.find()
    ledger = workspace.ledger()
    task = _get(ledger, task_id)  # its not-found and unreadable messages
    actor = cli_actor()
    if move is not OperatorMove.RELEASE:
        from assay.cli.temporal_stop import stop_running

        # Under --json, stdout holds the document only: the workflow's line goes to stderr.
        said = contextlib.redirect_stdout(sys.stderr) if json_output else contextlib.nullcontext()
        with said:
            stopped = stop_running(task, reason or _STOP_REASONS[move])
        if stopped:  # its workflow stops the run and holds the task
            if json_output:
                recorded = reason or _STOP_REASONS[move]
                _print_move(workspace, ledger, _get(ledger, task_id), move, actor, recorded)
            return
    try:
        moved = move_task(ledger, task_id, move, actor=actor, now=datetime.now(UTC), reason=reason)
    except MoveRefused as exc:
        fail(str(exc), EXIT_USAGE)
    if json_output:
        recorded = None if move is OperatorMove.RELEASE else moved.task.hold_reason
        _print_move(workspace, ledger, moved.task, move, actor, recorded)
    else:
        typer.echo(f"{moved.task.id}: {moved.task.status.value}{moved.note}")


def _print_move(
    workspace: Workspace,
    ledger: Ledger,
    task: Task,
    move: OperatorMove,
    actor: Actor,
    reason: str | None,
) -> None:
    """An operator move's JSON: what was done, by whom, from where, why, and the task as
    ``task show --json`` prints it now."""
    runs, usage = ledger.runs(task.id), _usage(ledger, task.id)
    shown = _show_document(task, runs, workspace.home, datetime.now(UTC), usage)
    via = actor.via.value
    print_json({"action": move.value, "by": actor.by, "via": via, "reason": reason, "task": shown})


@app.command()
def hold(
    task_id: str,
    reason: Annotated[str, typer.Option(help="Why it is held.")] = HOLD_REASON,
    json_output: JsonFlag = False,
) -> None:
    """Hold a queued or failed task (manual); `release` lets it run again."""
    _move(task_id, OperatorMove.HOLD, reason, json_output=json_output)


@app.command()
def release(task_id: str, json_output: JsonFlag = False) -> None:
    """Release a held task (queued again, attempts reset to 0, history kept), or let a task
    that waits for its provider quota run now (the wait is cleared, attempts kept)."""
    _move(task_id, OperatorMove.RELEASE, json_output=json_output)


@app.command()
def cancel(task_id: str, json_output: JsonFlag = False) -> None:
    """Cancel a queued or failed task: held (manual) with the reason "cancelled"."""
    _move(task_id, OperatorMove.CANCEL, json_output=json_output)
