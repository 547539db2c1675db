"""What ``assay task delete`` and ``assay task prune`` do and print (the commands themselves
are declared with the other task commands, in :mod:`assay.cli.tasks`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import typer

from assay.cli.workspace import EXIT_FAILED, EXIT_USAGE, Workspace, fail, print_json
from assay.core.text import shown

if TYPE_CHECKING:
    from assay.engine.operations.task_removal import Removal

NOT_PRUNED = "queued or running"


def delete(task_ids: list[str], *, dry_run: bool, json_output: bool) -> None:
    """Delete the tasks (all of them, or none: exit 2 saying which cannot go and why)."""
    from assay.adapters.store.deletes import DeleteRefused
    from assay.engine.operations.task_removal import delete_tasks

    workspace = Workspace.find()
    ledger = workspace.existing_ledger()  # none yet: no task either, and none is created
    try:
        if ledger is None:
            raise DeleteRefused([(task_id, "no such task") for task_id in task_ids])
        removal = delete_tasks(
            repo=workspace.repo,
            home=workspace.home,
            ledger=ledger,
            task_ids=task_ids,
            dry_run=dry_run,
            now=datetime.now(UTC),
        )
    except DeleteRefused as refused:
        fail(f"nothing deleted: {_refusals(refused.kept)}", EXIT_USAGE)
    if json_output:
        print_json(removal.to_json())
    else:
        _say(removal)
    _exit(removal)


def prune(older_than: str, statuses: list[str], *, dry_run: bool, json_output: bool) -> None:
    """Delete the finished tasks of ``statuses`` that have not changed for ``older_than``."""
    from assay.adapters.store.deletes import Deletion
    from assay.core.gc import DurationError, format_duration, parse_duration
    from assay.core.vocab import TaskStatus
    from assay.engine.operations.task_removal import (
        PRUNABLE,
        PRUNED_BY_DEFAULT,
        Removal,
        prune_tasks,
    )

    try:
        seconds = parse_duration(older_than)
    except DurationError as exc:
        fail(f"--older-than: {exc}")
    allowed = [s.value for s in PRUNABLE]
    for status in statuses:
        if status not in allowed:
            queued = status in (TaskStatus.QUEUED.value, TaskStatus.RUNNING.value)
            why = f"prune never removes {NOT_PRUNED} tasks" if queued else "no such status"
            fail(
                f"--status {status}: {why}; use {', '.join(allowed)} "
                "(`assay task delete ID` removes one task that is not running)"
            )
    chosen = [TaskStatus(s) for s in dict.fromkeys(statuses)] or list(PRUNED_BY_DEFAULT)
    workspace = Workspace.find()
    ledger = workspace.existing_ledger()  # none yet: nothing to prune, and none is created
    if ledger is None:
        removal = Removal(dry_run=dry_run, deletion=Deletion())
    else:
        removal = prune_tasks(
            repo=workspace.repo,
            home=workspace.home,
            ledger=ledger,
            older_than=seconds,
            statuses=chosen,
            dry_run=dry_run,
            now=datetime.now(UTC),
        )
    age = format_duration(seconds)
    names = "/".join(s.value for s in chosen)
    if json_output:
        document: dict[str, Any] = removal.to_json()
        document.update(older_than=age, older_than_seconds=seconds, statuses=names.split("/"))
        print_json(document)
    else:
        _say(removal, skipped_are_told=True)
        if not removal.deletion.deleted:
            unchanged = f" unchanged for {age}" if seconds else ""
            typer.echo(f"nothing to prune: no {names} task{unchanged}")
    _exit(removal)


def _say(removal: Removal, *, skipped_are_told: bool = False) -> None:
    """One line per deleted task, per file removed or left, then a summary."""
    dry = removal.dry_run
    for task in removal.deletion.deleted:
        runs = f"{len(task.runs)} run(s), {task.events} event(s), {task.usage} usage row(s)"
        verb = "would delete" if dry else "deleted"
        typer.echo(f"{verb} {task.id}: {shown(task.title)} ({task.status}; {runs})")
    if skipped_are_told:
        for task_id, why in removal.deletion.kept:
            typer.echo(f"kept {task_id}: {why}")
    verb = "would remove" if dry else "removed"
    for item in removal.removed:
        typer.echo(f"{verb} {_words(item.kind)} {item.target}")
    for item, why in removal.left:
        typer.echo(f"kept {_words(item.kind)} {item.target}: {why}")
    for item, why in removal.failed:
        typer.echo(f"could not remove {_words(item.kind)} {item.target}: {why}")
    if removal.deletion.deleted:
        count = len(removal.deletion.deleted)
        typer.echo(f"{'would delete' if dry else 'deleted'} {count} task(s)")


def _words(kind: str) -> str:
    """A removed thing's kind as the README says it."""
    return {
        "run_folder": "run folder",
        "halt_state": "halt state file",
        "contract": "contract file",
        "seats": "seat folder",
        "worktrees": "seat worktree folder",
        "branch": "branch",
        "relay": "halt relay folder",
    }.get(kind, kind)


def _refusals(kept: list[tuple[str, str]]) -> str:
    said = [f"{task_id}: {why}" for task_id, why in kept]
    hint = " (see `assay task list`)" if any(why == "no such task" for _, why in kept) else ""
    return "; ".join(said) + hint


def _exit(removal: Removal) -> None:
    """Exit 1 when something could not be removed (said above), as ``assay gc`` does."""
    if removal.failed:
        raise typer.Exit(EXIT_FAILED)
