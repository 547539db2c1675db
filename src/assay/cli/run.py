"""``assay run``: run one task now, with live progress, and exit by what settle made of it.

Exit codes: 0 done, 1 failed (runnable again), 2 a bad invocation or contract, 3 held for a
human, 4 an internal error, 130 / 143 stopped by SIGINT / SIGTERM (the run closed as
interrupted, the task held until ``assay task release``: see :mod:`assay.cli.stopped`).
"""

from __future__ import annotations

import json
import sys
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
from assay.cli.new_task import (
    CONTRACT_FLAGS,
    SPENDING_FLAGS,
    build_contract,
    flags_given,
    queue_task,
    refuse_flags_beside_a_contract,
    spending_flags,
    unverified_warning,
)
from assay.cli.output_options import EventsFlag, ProgressFlag, ProgressMode
from assay.cli.signals import graceful_stop, interrupted_exit
from assay.cli.task_place import refuse_other_repository
from assay.cli.workspace import (
    EXIT_DONE,
    EXIT_INTERNAL,
    Workspace,
    fail,
    refuse_secret_env,
    refuse_unconfinable,
    refuse_unrunnable,
)
from assay.core.vocab import LandMode

if TYPE_CHECKING:
    from assay.cli.event_stream import EventStream
    from assay.core.contract import Contract
    from assay.core.tasks import Task


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
    .assay/runs/<run>/payload.json. Exit: 0 done, 1 failed, 2 bad input (a --task of another
    repository included: it runs only there, and nothing is changed), 3 held, 4 internal,
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
    from assay.engine.local.runner import recover_interrupted

    refuse_conflicting_flags(instruction, contract, task_id, ignore_wait, resume)
    spending = spending_flags(max_cost, max_tokens, task_max_cost, task_max_tokens)
    if task_id is not None or resume:  # a stored task's contract: a flag would be ignored
        given = flags_given(ctx, CONTRACT_FLAGS)
        given += [flag for flag, key in SPENDING_FLAGS.items() if spending[key] is not None]
        if given:
            fail(
                f"{', '.join(given)} cannot be combined with --task or --resume: the task's "
                "contract sets these (give them when it is created)"
            )
    if contract is not None:
        refuse_flags_beside_a_contract(ctx)
    built: Contract | None = None
    found: Workspace | None = None  # looked up once: each lookup is two git calls
    if task_id is None and (instruction is not None or contract is not None):
        # A bad contract or option is refused before anything is created.
        built = build_contract(
            instruction, contract, coder, coder_command, validator, land, seats,
            max_attempts, max_recovery, sandbox=sandbox,
            spending=spending, endpoint=(model, base_url, api_key_env),
        )  # fmt: skip
        refuse_unconfinable(built)  # before the task is created
        refuse_secret_env(built)
        found = Workspace.find(require_commit=True)
        refuse_unrunnable(built, workspace=found)
    if built is None and task_id is None and not resume:
        fail("give an instruction, --contract FILE, --task ID or --resume (see assay run -h)")
    workspace = found or Workspace.find(require_commit=True)
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
        from assay.adapters.repo_identity import repository_id
        from assay.cli.resume import recovered_exit, recovered_line

        here = repository_id(workspace.repo)
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
            if task.runnable(now) and not task.belongs_elsewhere(here):  # its own workers'
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
        refuse_other_repository(task, workspace.repo)  # exit 2: another repository's
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
        jobs.append((queue_task(ledger, built, now, repo=workspace.repo), built))
    for _, chosen in jobs:  # a stored task's contract (--task, --resume) too
        refuse_unconfinable(chosen)
        refuse_secret_env(chosen)
        if chosen is not built:
            refuse_unrunnable(chosen)
    ours.update(task.id for task, _ in jobs)

    from assay.cli.progress_choice import progress_for
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
