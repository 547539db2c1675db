"""``assay task delete|prune``: tasks removed from the ledger, then what their runs kept on disk.

The ledger's rows go in one transaction (:mod:`assay.adapters.store.deletes`: a running task is
never deleted). Once that has committed, the files of the runs it deleted go too: what ``assay
gc`` would remove of them now (seat repositories, the branches of candidates kept for a look,
halt relay folders), then each run's folder (``runs/<run>``: payload, logs) and halt state
file, and the task's contract file an older assay wrote. Never removed: a branch a run left on
purpose (``land: branch``, a pull request's: yours) or one checked out somewhere, and the files
of a run whose process still holds its lock; each is said. A file that cannot be removed is
said, and the rest goes on.

Prune removes the tasks that are finished and have not changed for ``older_than``: done by
default; held (waiting for a human) and failed (runnable again) only when asked by status.
Queued and running tasks are never pruned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from assay.adapters import folders
from assay.adapters.store import halt_files
from assay.adapters.store.contracts import legacy_contract_path
from assay.adapters.store.deletes import DeletedTask, Deletion, TaskState
from assay.adapters.store.records import RunRecord
from assay.adapters.store.sql import Ledger
from assay.core.gc import RunFacts, format_duration, plan_gc
from assay.core.vocab import TaskFileKind, TaskStatus
from assay.engine.operations.gc import find_leftovers, remove_leftover, run_facts

PRUNABLE = (TaskStatus.DONE, TaskStatus.HELD, TaskStatus.FAILED)
"""The statuses prune may remove: a task that is settled. Queued and running never."""
PRUNED_BY_DEFAULT = (TaskStatus.DONE,)


@dataclass(frozen=True)
class FileItem:
    """One thing on disk (or a branch) a removed task's runs kept."""

    kind: str  # a TaskFileKind or a LeftoverKind
    target: str
    run_id: str | None


@dataclass
class Removal:
    """What a delete or a prune did (or, dry, would do)."""

    dry_run: bool
    deletion: Deletion
    removed: list[FileItem] = field(default_factory=list)
    left: list[tuple[FileItem, str]] = field(default_factory=list)  # kept on purpose: why
    failed: list[tuple[FileItem, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        def item(found: FileItem, **more: str) -> dict[str, Any]:
            return {"kind": found.kind, "target": found.target, "run_id": found.run_id, **more}

        return {
            "dry_run": self.dry_run,
            "deleted": [_task_json(t) for t in self.deletion.deleted],
            "kept": [{"id": i, "reason": why} for i, why in self.deletion.kept],
            "removed": [item(x) for x in self.removed],
            "left": [item(x, reason=why) for x, why in self.left],
            "failed": [item(x, error=why) for x, why in self.failed],
        }


def delete_tasks(
    *,
    repo: Path,
    home: Path,
    ledger: Ledger,
    task_ids: Sequence[str],
    dry_run: bool = False,
    is_alive: Callable[[Path], bool] | None = None,
    now: datetime,
) -> Removal:
    """Delete every one of ``task_ids`` and their files, or none (the store's
    ``DeleteRefused`` says which cannot go and why: unknown, running)."""
    deletion = ledger.delete_tasks(task_ids, dry_run=dry_run)
    return _remove_files(repo, home, deletion, dry_run, is_alive, now)


def prune_tasks(
    *,
    repo: Path,
    home: Path,
    ledger: Ledger,
    older_than: int,
    statuses: Sequence[TaskStatus] = PRUNED_BY_DEFAULT,
    dry_run: bool = False,
    is_alive: Callable[[Path], bool] | None = None,
    now: datetime,
) -> Removal:
    """Delete the tasks of ``statuses`` (each in :data:`PRUNABLE`) unchanged for longer than
    ``older_than`` seconds, and their files. A task that started or changed since it was
    listed is kept (the rule is checked again under the ledger's lock)."""
    wanted = {s.value for s in statuses}
    if not wanted <= {s.value for s in PRUNABLE}:
        raise ValueError(f"prune removes only {', '.join(s.value for s in PRUNABLE)} tasks")
    cutoff = now - timedelta(seconds=older_than)
    tasks, _unreadable = ledger.scan_tasks()  # an unreadable row is never judged old
    chosen = [t.id for t in tasks if t.status.value in wanted and t.updated_at <= cutoff]

    def still_old(state: TaskState) -> str | None:
        if state.status not in wanted:
            return f"it is {state.status} now"
        if state.updated_at > cutoff:
            return f"it changed less than {format_duration(older_than)} ago"
        return None

    deletion = ledger.delete_tasks(chosen, rule=still_old, all_or_nothing=False, dry_run=dry_run)
    return _remove_files(repo, home, deletion, dry_run, is_alive, now)


def _remove_files(
    repo: Path,
    home: Path,
    deletion: Deletion,
    dry_run: bool,
    is_alive: Callable[[Path], bool] | None,
    now: datetime,
) -> Removal:
    """After the ledger's commit: what the deleted runs left, as ``assay gc`` would remove it
    at once, then their own folders and halt state, then an older assay's contract files."""
    if is_alive is None:
        from assay.engine.local.runner import run_is_alive

        is_alive = run_is_alive
    removal = Removal(dry_run=dry_run, deletion=deletion)
    records = {r.id: r for task in deletion.deleted for r in task.runs}
    facts = {run_id: run_facts(r, home, is_alive) for run_id, r in records.items()}
    found = [f for f in find_leftovers(repo, home) if f.run_id in facts]
    plan = plan_gc(found, facts, now=now, older_than=0)
    for leftover in plan.remove:
        item = FileItem(leftover.kind.value, leftover.target, leftover.run_id)
        problem = None if dry_run else remove_leftover(repo, leftover)
        _record(removal, item, problem)
    for skipped in plan.skip:
        found_item = skipped.leftover
        removal.left.append(
            (FileItem(found_item.kind.value, found_item.target, found_item.run_id), skipped.reason)
        )
    for record in records.values():
        _remove_run_files(removal, home, record, facts[record.id], dry_run)
    for task in deletion.deleted:
        path = legacy_contract_path(home, task.id)
        if path.is_file():
            item = FileItem(TaskFileKind.CONTRACT.value, str(path), None)
            _record(removal, item, None if dry_run else _unlink(path))
    return removal


def _remove_run_files(
    removal: Removal, home: Path, record: RunRecord, facts: RunFacts, dry_run: bool
) -> None:
    folder = home / "runs" / record.id
    dispatch = record.dispatch_id or record.id
    state = halt_files.state_path(home / "halt-state", dispatch)
    if facts.alive:  # its process (closing up) still holds the lock: not pulled from under it
        if folder.exists():
            item = FileItem(TaskFileKind.RUN_FOLDER.value, str(folder), record.id)
            removal.left.append((item, "its process still holds its lock: remove it later"))
        return
    if state.is_file():
        item = FileItem(TaskFileKind.HALT_STATE.value, str(state), record.id)
        _record(removal, item, None if dry_run else _unlink(state))
        lock = state.parent / f".{state.name}.lock"
        if not dry_run and lock.is_file():
            _unlink(lock)
    if folder.is_dir() and not folder.is_symlink():
        item = FileItem(TaskFileKind.RUN_FOLDER.value, str(folder), record.id)
        problem = None
        if not dry_run:
            left = folders.remove_tree(folder)
            problem = None if left.complete else left.summary()
        _record(removal, item, problem)


def _record(removal: Removal, item: FileItem, problem: str | None) -> None:
    if problem is None:
        removal.removed.append(item)
    else:
        removal.failed.append((item, problem))


def _unlink(path: Path) -> str | None:
    try:
        path.unlink()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{exc.strerror or exc}"
    return None


def _task_json(task: DeletedTask) -> dict[str, Any]:
    return {
        "id": task.id,
        "title": task.title,
        "status": task.status,
        "updated_at": task.updated_at.isoformat().replace("+00:00", "Z"),
        "runs": [r.id for r in task.runs],
        "events": task.events,
        "usage": task.usage,
    }
