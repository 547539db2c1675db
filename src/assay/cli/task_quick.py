"""``assay task list``, ``task show ID`` and ``ledger show ID`` answered without typer.

:mod:`assay.cli.main` offers these commands here before it builds the typer app (typer builds
every parameter with pydantic, which alone costs more than the whole answer may). This reads a
SQLite ledger through :mod:`assay.adapters.store.quick_read` and prints exactly what the typer
commands in :mod:`assay.cli.tasks` and :mod:`assay.cli.ledger` print through the Ledger.
:func:`main` returns None — and typer's command answers — for anything else: ``--help``, an
option spelt another way, a bad status, no SQLite ledger at the head revision, a row the
models would judge (see :mod:`~assay.adapters.store.quick_read`).

Standard library and light assay modules only.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.cli import task_views as views
from assay.core.text import printable
from assay.core.vocab import TaskStatus

if TYPE_CHECKING:
    from assay.adapters.store.quick_read import QuickLedger
    from assay.adapters.store.quick_rows import TaskRow

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def main(args: list[str]) -> int | None:
    """The exit code, once the answer is printed; None when typer's command must answer."""
    parsed = _parse(args)
    if parsed is None:
        return None
    command, subject, as_json = parsed
    if command != "list" and not views.storable(subject or ""):
        return None  # the Ledger path refuses such an id, in its words
    found = views.quick_ledger()
    if found is None:
        return None
    from assay.adapters.store.quick_read import NotQuick

    try:
        answer = _answer(found[0], found[1], command, subject, as_json)
    except NotQuick:
        return None
    if answer is None:  # the Ledger path's message for an id it does not hold
        sys.stderr.write(f"assay: {printable(f'no task {subject!r} (see `assay task list`)')}\n")
        return EXIT_USAGE
    return _write(answer)


def _parse(args: list[str]) -> tuple[str, str | None, bool] | None:
    """``(command, id or status, --json)`` for the plain spellings; None for the rest."""
    head, rest = tuple(args[:2]), args[2:]
    as_json = "--json" in rest
    rest = [a for a in rest if a != "--json"]
    if head == ("task", "list"):
        if not rest:
            return "list", None, as_json
        if len(rest) == 2 and rest[0] == "--status" and rest[1] in _STATUSES:
            return "list", rest[1], as_json
        return None
    if head in (("task", "show"), ("ledger", "show")) and len(rest) == 1:
        if rest[0].startswith("-"):
            return None  # an option, or an id typer would read as one
        return ("show" if head[0] == "task" else "ledger"), rest[0], as_json
    return None


_STATUSES = frozenset(s.value for s in TaskStatus)


def _answer(
    quick: QuickLedger, home: Path, command: str, subject: str | None, as_json: bool
) -> str | None:
    now = datetime.now(UTC)
    if command == "list":
        rows = quick.tasks(None if subject is None else TaskStatus(subject))
        return _task_list_json(rows) if as_json else views.list_text(rows, [], now)
    assert subject is not None
    if command == "ledger":
        document = quick.convergence(subject)
        if document is None:
            return None
        return json_text(document) if as_json else views.ledger_text(document)
    row = quick.task(subject)
    if row is None:
        return None
    runs = quick.runs(subject)
    document = views.show_document(row, row.as_json(), runs, [r.as_json() for r in runs], home, now)
    return json_text(document) if as_json else views.show_text(row, runs, document, now)


def _write(text: str) -> int:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `assay task list | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    return EXIT_OK


def json_text(value: Any) -> str:
    """``json.dumps(value, indent=2) + "\\n"``, as ``assay.cli.workspace.print_json`` writes it,
    several times faster: the standard library's indented encoder is pure Python, and a list
    of 10,000 tasks spends longer there than in the rest of the command. For the JSON values
    the documents here hold (objects, arrays, text, integers, booleans, null); a test compares
    it with ``json.dumps``."""
    out: list[str] = []
    _encode(value, "\n", out)
    out.append("\n")
    return "".join(out)


def _task_list_json(rows: list[TaskRow]) -> str:
    """:func:`json_text` of ``[row.as_json() for row in rows]``, a template per task (its keys
    are known): a tenth of the time of walking 10,000 dictionaries."""
    from assay.adapters.store.quick_rows import json_stored_time, json_time

    if not rows:
        return "[]\n"
    encode = encode_basestring_ascii
    blocks = []
    for row in rows:
        run_ids = (
            "[\n" + ",\n".join("      " + encode(r) for r in row.run_ids) + "\n    ]"
            if row.run_ids
            else "[]"
        )
        blocks.append(
            _TASK_TEMPLATE
            % (
                encode(row.id),
                encode(row.title),
                encode(row.instruction),
                encode(row.status),
                row.attempts,
                "null" if row.last_error is None else encode(row.last_error),
                "null" if row.hold_reason is None else encode(row.hold_reason),
                "null" if row.hold_source is None else encode(row.hold_source),
                "null" if row.diagnostic is None else encode(row.diagnostic),
                run_ids,
                "null" if row.not_before is None else encode(json_time(row.not_before)),
                encode(json_stored_time(row.stored_created_at)),
                encode(json_stored_time(row.stored_updated_at)),
            )
        )
    return "[\n" + ",\n".join(blocks) + "\n]\n"


_TASK_TEMPLATE = "\n".join(
    [
        "  {",
        '    "id": %s,',
        '    "title": %s,',
        '    "instruction": %s,',
        '    "status": %s,',
        '    "attempts": %d,',
        '    "last_error": %s,',
        '    "hold_reason": %s,',
        '    "hold_source": %s,',
        '    "diagnostic": %s,',
        '    "run_ids": %s,',
        '    "not_before": %s,',
        '    "created_at": %s,',
        '    "updated_at": %s',
        "  }",
    ]
)


def _encode(value: Any, newline: str, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(encode_basestring_ascii(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = newline + "  "
        first = True
        for key, item in value.items():
            out.append(("{" if first else ",") + inner + encode_basestring_ascii(key) + ": ")
            first = False
            _encode(item, inner, out)
        out.append(newline + "}")
    elif isinstance(value, list):
        if not value:
            out.append("[]")
            return
        inner = newline + "  "
        first = True
        for item in value:
            out.append(("[" if first else ",") + inner)
            first = False
            _encode(item, inner, out)
        out.append(newline + "]")
    else:  # nothing the documents hold; json's own words for anything else
        import json

        out.append(json.dumps(value, default=str))
