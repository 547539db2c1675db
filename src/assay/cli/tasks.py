"""``assay task add | list | show | hold | release | cancel | stop | retry | delete | prune``:
the queue of tasks."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from assay.cli import task_views as views
from assay.cli.completion import TaskId, task_ids
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
from assay.cli.task_lookup import find_task as _find
from assay.cli.workspace import (
    EXIT_USAGE,
    Workspace,
    command_group,
    fail,
    print_json,
    refuse_secret_env,
    refuse_unconfinable,
    refuse_unrunnable,
)
from assay.core.vocab import LandMode, OperatorMove, TaskStatus

if TYPE_CHECKING:
    from assay.core.tasks import Task

app = command_group()

HOLD_REASON = "held by an operator"

JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]
STATUSES = [s.value for s in TaskStatus]
PRUNABLE = [s.value for s in (TaskStatus.DONE, TaskStatus.HELD, TaskStatus.FAILED)]
"""What ``task prune --status`` may name (``operations.task_removal.PRUNABLE``, which a test
checks this against: the engine is not imported to build the options)."""


def _dump(task: Task) -> dict[str, object]:
    return task.model_dump(mode="json")


@app.command()
def add(
    ctx: typer.Context,
    instruction: Annotated[
        str | None,
        typer.Argument(help="What to do; with --contract, it replaces the contract's `task:`."),
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
    from assay.cli.new_task import (
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
        endpoint=(model, base_url, api_key_env),
    )  # fmt: skip
    refuse_secret_env(built)
    if not no_check:  # the checkout's state is the run's to check, when it runs
        refuse_unconfinable(built)
        refuse_unrunnable(built, landing=False)
    workspace = Workspace.find(require_commit=True)
    task = queue_task(workspace.ledger(), built, datetime.now(UTC), repo=workspace.repo)
    if json_output:
        print_json(_dump(task))
    else:
        typer.echo(f"queued {task.id}: {task.title}")


@app.command("list")
def list_tasks(
    status: Annotated[
        str | None,
        typer.Option(
            metavar=f"<{'|'.join(STATUSES)}>",
            help="Only tasks with this status.",
            autocompletion=lambda incomplete: [s for s in STATUSES if s.startswith(incomplete)],
        ),
    ] = None,
    json_output: JsonFlag = False,
) -> None:
    """List tasks, oldest first, with status, attempts and why a task waits or is held."""
    if status is not None and status not in STATUSES:  # one line, like every refusal here
        fail(f"unknown status {status!r}: use one of {', '.join(STATUSES)}")
    from assay.cli.task_list import listing, quick_answer

    chosen = None if status is None else TaskStatus(status)
    answer = quick_answer(chosen, json_output)  # what the entry point answers before typer
    if answer is None:
        ledger = Workspace.find().existing_ledger()  # none yet: no task, and none is created
        rows, unreadable = ledger.scan_task_rows(chosen) if ledger is not None else ([], [])
        answer = listing(rows, unreadable, json_output, datetime.now(UTC))
    sys.stdout.write(answer)


@app.command()
def show(task_id: TaskId, json_output: JsonFlag = False) -> None:
    """One task: status, attempts, runs, any wait, and — when held — why, by whom, and the
    ways back (re-arm a fired halt, release)."""
    now = datetime.now(UTC)
    workspace = Workspace.find()
    ledger, task = _find(workspace, task_id)
    records = ledger.runs(task_id)
    from assay.cli.task_documents import show_document, task_usage

    usage = task_usage(ledger, task_id)
    document = show_document(ledger, task, records, workspace.home, now, usage)
    if json_output:
        print_json(document)
    else:
        gone = views.gone_runs(records, workspace.home)
        sys.stdout.write(views.show_text(task, records, document, now, usage, gone))


def _move(
    task_id: str, move: OperatorMove, reason: str | None = None, *, json_output: bool = False
) -> None:
    from assay.adapters.actor import cli_actor
    from assay.engine.operations.moves import MoveRefused, move_task

    workspace = Workspace.find()
    ledger, task = _find(workspace, task_id)  # its not-found and unreadable messages
    actor = cli_actor()
    if move is not OperatorMove.RELEASE and task.status is TaskStatus.RUNNING:
        from assay.cli.task_stop import stop_running

        # Its run is asked to stop (as `task stop` asks): its close holds the task. One out of
        # reach here falls to the move, which refuses it saying how to stop it.
        cancel = move is OperatorMove.CANCEL
        if stop_running(
            workspace, ledger, task, cancel, reason, actor, json_output, 60.0, refuse=False
        ):
            return
    try:
        moved = move_task(ledger, task_id, move, actor=actor, now=datetime.now(UTC), reason=reason)
    except MoveRefused as exc:
        fail(str(exc), EXIT_USAGE)
    if json_output:
        recorded = None if move is OperatorMove.RELEASE else moved.task.hold_reason
        from assay.cli.task_documents import print_move

        print_move(workspace, ledger, moved.task, move, actor, recorded)
    else:
        typer.echo(f"{moved.task.id}: {moved.task.status.value}{moved.note}")


@app.command()
def hold(
    task_id: TaskId,
    reason: Annotated[str, typer.Option(help="Why it is held.")] = HOLD_REASON,
    json_output: JsonFlag = False,
) -> None:
    """Hold a queued or failed task (manual), or stop a running one as `task stop` does;
    `release` lets it run again."""
    _move(task_id, OperatorMove.HOLD, reason, json_output=json_output)


@app.command()
def release(task_id: TaskId, json_output: JsonFlag = False) -> None:
    """Release a held task (queued again, attempts reset to 0, history kept), or let a task
    that waits for its provider quota run now (the wait is cleared, attempts kept)."""
    _move(task_id, OperatorMove.RELEASE, json_output=json_output)


@app.command()
def cancel(task_id: TaskId, json_output: JsonFlag = False) -> None:
    """Cancel a queued or failed task: held (manual) with the reason "cancelled" (a running
    one is stopped, as `task stop --cancel` does)."""
    _move(task_id, OperatorMove.CANCEL, json_output=json_output)


@app.command()
def stop(
    task_id: TaskId,
    cancel: Annotated[
        bool, typer.Option("--cancel", help="Record it as cancelled rather than held.")
    ] = False,
    reason: Annotated[
        str | None, typer.Option(help="Why it is stopped (kept as its hold reason).")
    ] = None,
    wait: Annotated[
        float,
        typer.Option(
            metavar="SECONDS", min=0, help="How long to wait for its run to close (0: not at all)."
        ),
    ] = 60.0,
    json_output: JsonFlag = False,
) -> None:
    """Stop a running task: its run is stopped (coders ended, the run closed as interrupted
    and refunded) and the task held (manual) with the reason; `release` lets it run again.

    A run on this machine (`assay run`, `assay serve`) is asked to stop through its run
    folder; a run on Temporal (ASSAY_TEMPORAL=HOST:PORT set) through its workflow. Either way
    the request and the hold are recorded in the ledger with who asked. The dashboard's stop
    button does the same.

    Exit 0 stopped (or stopping, when --wait ran out), 2 no such task, or its run is not
    reachable from here (another machine, or its process is gone: `assay run --resume`),
    4 an unreadable task, 5 the task is not running (nothing done).
    """
    from assay.cli.task_stop import stop as stop_it

    stop_it(task_id, cancel=cancel, reason=reason, json_output=json_output, wait=wait)


@app.command()
def retry(task_id: TaskId, json_output: JsonFlag = False) -> None:
    """Re-run a failed task now: a failed task is runnable again, but may wait (a provider's
    quota reset, a backoff after refunded runs); retry clears the wait, attempts kept, and
    `assay serve` picks it up. Recorded in the ledger with who did it. A held task is
    released instead (`assay task release`).

    Exit 0 runnable now, 2 no such task, 4 an unreadable task, 5 the task is not failed
    (nothing done).
    """
    from assay.cli.task_stop import retry as retry_it

    retry_it(task_id, json_output=json_output)


@app.command()
def delete(
    ids: Annotated[
        list[str],
        typer.Argument(
            metavar="ID",
            help="The tasks to delete (see `assay task list`).",
            autocompletion=task_ids,
        ),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be deleted; delete nothing.")
    ] = False,
    json_output: JsonFlag = False,
) -> None:
    """Delete tasks and everything kept of them (never a running task).

    Their runs, events, usage and contract go from the ledger in one transaction, then their
    run folders, halt state, seats and the branches of candidates kept for a look. All or
    none: an unknown id or a running task (stop its run first: Ctrl-C the `assay run` or
    `assay serve` running it) is refused, exit 2, and nothing is deleted. Never removed: a
    branch a run left for you (land: branch, a pull request's) or one checked out somewhere.
    Exit 1 when a file could not be removed (listed).
    """
    from assay.cli.task_removal import delete as delete_them

    delete_them(ids, dry_run=dry_run, json_output=json_output)


@app.command()
def prune(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            metavar="DURATION",
            help="Delete tasks unchanged for longer than this: 30m, 12h, 7d, 2w; 0 for all.",
        ),
    ],
    status: Annotated[
        list[str] | None,
        typer.Option(
            "--status",
            metavar=f"<{'|'.join(PRUNABLE)}>",
            help="Which finished tasks: done (the default), held, failed (repeat for more).",
            autocompletion=lambda incomplete: [s for s in PRUNABLE if s.startswith(incomplete)],
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be deleted; delete nothing.")
    ] = False,
    json_output: JsonFlag = False,
) -> None:
    """Delete finished tasks unchanged for --older-than, as `task delete` does.

    Done tasks by default; held (waiting for a human) and failed (runnable again) only when
    --status names them. Queued and running tasks are never pruned. Exit 1 when a file could
    not be removed (listed), 2 for a bad DURATION or status.
    """
    from assay.cli.task_removal import prune as prune_them

    prune_them(older_than, status or [], dry_run=dry_run, json_output=json_output)
