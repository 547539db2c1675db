"""What ``assay task list`` prints (:func:`listing`), from the one row type
(:class:`~assay.adapters.store.task_rows.TaskRow`) every backend's read gives.

Both of its parsers answer through :func:`quick_answer` first: typer's command
(:func:`assay.cli.tasks.list_tasks`), and :func:`main`, which the command table
(:mod:`assay.cli.commands`) has :mod:`assay.cli.main` offer the plain spellings to before typer
is imported: typer builds every parameter with pydantic, which alone costs more than the whole
answer may. There the rows come from :mod:`assay.adapters.store.quick_read` (the Ledger's own
SQL text and row builder, on ``sqlite3``); where it cannot read (no SQLite ledger at the head
revision, a locked file, a configured database URL) :func:`quick_answer` returns None and
typer's command asks the Ledger for the same rows. ``task show`` and ``ledger show`` are the
Ledger's: they sum the usage journal.

Standard library and light assay modules only.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from assay.cli import task_views as views
from assay.core.vocab import TaskStatus

if TYPE_CHECKING:
    from assay.adapters.store.task_rows import TaskRow

EXIT_OK = 0
EXIT_FAILED = 1


def main(args: list[str]) -> int | None:
    """The exit code, once the answer is printed; None when typer's command must answer."""
    parsed = _parse(args)
    if parsed is None:
        return None
    status, as_json = parsed
    answer = quick_answer(None if status is None else TaskStatus(status), as_json)
    return None if answer is None else _write(answer)


def quick_answer(status: TaskStatus | None, as_json: bool) -> str | None:
    """What ``task list`` prints, read here; None when the Ledger must answer."""
    found = views.quick_ledger()
    if found is None:
        return None
    from assay.adapters.store.quick_read import NotQuick

    try:
        rows, unreadable = found[0].tasks(status)
    except NotQuick:
        return None
    return listing(rows, unreadable, as_json, datetime.now(UTC))


def listing(
    rows: Sequence[TaskRow], unreadable: list[tuple[str, str]], as_json: bool, now: datetime
) -> str:
    """``task list``'s table (or JSON): a row per task, then a row per unreadable one."""
    if not as_json:
        return views.list_text(rows, unreadable, now)
    documents = [row.as_json() for row in rows]
    documents += [{"id": i, "status": "unreadable", "problem": why} for i, why in unreadable]
    return json.dumps(documents, indent=2) + "\n"


def _parse(args: list[str]) -> tuple[str | None, bool] | None:
    """``(status, --json)`` for the plain spellings of ``task list``; None for the rest."""
    head, rest = tuple(args[:2]), args[2:]
    as_json = "--json" in rest
    rest = [a for a in rest if a != "--json"]
    if head != ("task", "list"):
        return None
    if not rest:
        return None, as_json
    if len(rest) == 2 and rest[0] == "--status" and rest[1] in _STATUSES:
        return rest[1], as_json
    return None


_STATUSES = frozenset(s.value for s in TaskStatus)


def _write(text: str) -> int:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `assay task list | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    return EXIT_OK
