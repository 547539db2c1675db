"""``assay logs RUN [NAME]``: a run's logs (its coders', checks' and judges'), as the ledger
keeps them, so a run that ran on another machine reads the same as one that ran here.

The ledger's copy is bounded and redacted (:mod:`assay.core.run_logs`,
:mod:`assay.adapters.log_shipping`). A run closed before the ledger kept logs is read from its
run folder, when that is on this machine, bounded and redacted the same way. It only reads.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from assay.cli.completion import RunId
from assay.cli.workspace import Workspace, fail, print_json

if TYPE_CHECKING:
    from assay.adapters.redact import Redactor
    from assay.adapters.store.run_logs import LogEntry
    from assay.adapters.store.sql import Ledger

LEDGER = "ledger"
FILE = "file"  # read from the run folder here: the ledger has no copy


@dataclass(frozen=True)
class Found:
    entry: LogEntry
    source: str  # LEDGER or FILE


def logs(
    run_id: RunId,
    name: Annotated[
        str | None,
        typer.Argument(
            help="One log's name, as the listing shows it (its path in the run folder, e.g. "
            "attempt-1/seat-1/coder-attempt1.log): print its text. Omit it to list the logs."
        ),
    ] = None,
    tail: Annotated[
        int | None,
        typer.Option("--tail", metavar="N", min=1, help="Only the last N lines of the log."),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Machine-readable JSON.")] = False,
) -> None:
    """A run's logs: list them (name, role, attempt, seat, size, cut or not), or print one.

    Each log is kept in the ledger as the run goes (when a coder or a check ends, and at the
    run's close), so any machine that reads the ledger shows it: at most 256 KiB of each (its
    first 32 KiB and its end, a line saying how much was cut between), at most 8 MiB per run
    (the oldest attempts' coder logs cut first), every secret the run found and every secret
    of the operator's redacted. A run closed before the ledger kept logs is read from its
    folder on this machine. Exit 0; 2 for an unknown run or log; 4 when a log cannot be read.
    """
    if tail is not None and name is None:
        fail("--tail prints the end of one log: name it (see `assay logs RUN`)")
    workspace = Workspace.find()
    ledger = _known_run(workspace.existing_ledger(), run_id)  # none yet: no run, none made
    run_dir = workspace.home / "runs" / run_id
    if name is None:
        listed = _listing(ledger, run_id, run_dir)
        if json_output:
            print_json({"run_id": run_id, "logs": [_listed_json(f) for f in listed]})
        else:
            sys.stdout.write(_listing_text(run_id, listed))
        return
    found = _one(ledger, run_id, name, run_dir)
    text = found.entry.text or ""
    if tail is not None:
        text = "".join(text.splitlines(keepends=True)[-tail:])
    if json_output:
        print_json({**_listed_json(found), "run_id": run_id, "text": text})
        return
    from assay.core.text import shown

    sys.stdout.write(shown(text, lines=True))
    if text and not text.endswith("\n"):
        sys.stdout.write("\n")


def _known_run(ledger: Ledger | None, run_id: str) -> Ledger:
    from assay.adapters.store.sql import RunNotFound

    try:
        if ledger is None:
            raise RunNotFound(run_id)
        ledger.get_run(run_id)
    except RunNotFound:
        fail(f"no run {run_id!r}")
    return ledger


def _listing(ledger: Ledger, run_id: str, run_dir: Path) -> list[Found]:
    """The ledger's logs of the run; the run folder's here when the ledger has none."""
    kept = ledger.run_logs(run_id)
    if kept:
        return [Found(entry, LEDGER) for entry in kept]
    return [Found(entry, FILE) for entry in _folder_logs(run_dir)]


def _one(ledger: Ledger, run_id: str, name: str, run_dir: Path) -> Found:
    entry = ledger.run_log(run_id, name)
    if entry is not None:
        return Found(entry, LEDGER)
    from assay.adapters.log_shipping import log_files

    file = log_files(run_dir).get(name)  # only a log of the folder, never ../
    if file is None:
        fail(f"run {run_id} has no log {name!r} (see `assay logs {run_id}`)")
    try:
        read = _read_file(file.path, name, _redactor())
    except OSError as exc:
        fail(f"cannot read the log {name!r} of {run_id}: {exc}", 4)
    if read is None:
        fail(f"cannot read the log {name!r} of {run_id}: not a regular file", 4)
    return Found(read, FILE)


def _folder_logs(run_dir: Path) -> list[LogEntry]:
    """The run folder's logs as a listing shows them (their files' sizes, nothing cut yet)."""
    from assay.adapters.log_shipping import log_files

    redactor = _redactor()
    entries = []
    for name, file in log_files(run_dir).items():
        try:
            entry = _read_file(file.path, name, redactor, text=False)
        except OSError:
            continue
        if entry is not None:
            entries.append(entry)
    return entries


def _redactor() -> Redactor:
    """The operator's secrets, redacted as a shipped log's are."""
    from assay.adapters.log_shipping import operator_secrets
    from assay.adapters.redact import Redactor, redactions

    return Redactor(redactions(operator_secrets(os.environ)))


def _read_file(path: Path, name: str, redactor: Redactor, *, text: bool = True) -> LogEntry | None:
    """One log of the run folder, bounded and redacted as the ledger would keep it."""
    from datetime import UTC, datetime

    from assay.adapters.log_shipping import read_log
    from assay.adapters.store.run_logs import LogEntry

    changed = datetime.fromtimestamp(path.lstat().st_mtime, UTC)
    log = read_log(path, name, redactor)
    if log is None:
        return None
    return LogEntry(
        name=log.name,
        role=log.role,
        attempt=log.attempt,
        seat=log.seat,
        size=log.size,
        truncated=log.truncated,
        updated_at=changed,
        text=log.text if text else None,
    )


def _listed_json(found: Found) -> dict[str, Any]:
    entry = found.entry
    return {
        "name": entry.name,
        "role": entry.role.value,
        "attempt": entry.attempt,
        "seat": entry.seat,
        "size": entry.size,
        "truncated": entry.truncated,
        "updated_at": entry.updated_at.isoformat().replace("+00:00", "Z"),
        "source": found.source,
    }


def _listing_text(run_id: str, listed: list[Found]) -> str:
    from assay.core.text import shown

    if not listed:
        return f"run {run_id} has no logs (none kept in the ledger, no run folder here)\n"
    rows = [("NAME", "ROLE", "ATTEMPT", "SEAT", "BYTES", "KEPT")]
    for found in listed:
        e = found.entry
        rows.append(
            (
                shown(e.name),
                e.role.value,
                "-" if e.attempt is None else str(e.attempt),
                "-" if e.seat is None else str(e.seat),
                f"{e.size:,}",
                "cut" if e.truncated else "whole",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]  # fmt: skip
    if any(f.source == FILE for f in listed):
        lines.append("(read from the run folder here: the ledger keeps no copy of these)")
    return "\n".join(lines) + "\n"
