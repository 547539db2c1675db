"""``assay task list`` answered without typer.

:mod:`assay.cli.main` offers this command here before it builds the typer app (typer builds
every parameter with pydantic, which alone costs more than the whole answer may). This reads a
SQLite ledger through :mod:`assay.adapters.store.quick_read` and prints exactly what the typer
command in :mod:`assay.cli.tasks` prints through the Ledger. :func:`main` returns None — and
typer's command answers — for anything else: ``--help``, an option spelt another way, a bad
status, no SQLite ledger at the head revision, a row the models would judge (see
:mod:`~assay.adapters.store.quick_read`). ``task show`` and ``ledger show`` are the Ledger's:
they sum the usage journal, which is not read twice.

Standard library and light assay modules only.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from assay.cli import task_views as views
from assay.core.vocab import TaskStatus

if TYPE_CHECKING:
    from assay.adapters.store.quick_read import QuickLedger

EXIT_OK = 0
EXIT_FAILED = 1


def main(args: list[str]) -> int | None:
    """The exit code, once the answer is printed; None when typer's command must answer."""
    parsed = _parse(args)
    if parsed is None:
        return None
    status, as_json = parsed
    found = views.quick_ledger()
    if found is None:
        return None
    from assay.adapters.store.quick_rows import NotQuick

    try:
        answer = _answer(found[0], status, as_json)
    except NotQuick:
        return None
    return _write(answer)


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


def _answer(quick: QuickLedger, status: str | None, as_json: bool) -> str:
    rows = quick.tasks(None if status is None else TaskStatus(status))
    if as_json:  # as assay.cli.workspace.print_json writes the Ledger's tasks
        return json.dumps([row.as_json() for row in rows], indent=2) + "\n"
    return views.list_text(rows, [], datetime.now(UTC))


def _write(text: str) -> int:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `assay task list | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    return EXIT_OK
