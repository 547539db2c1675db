"""A run's logs as the dashboard shows them, and every long text opened whole.

The logs are the ledger's copies (``run_logs``: bounded and redacted when they were shipped),
so a run that ran on a Temporal worker reads the same as a local one. The run page lists them
and links each seat's and each validator's to its own; the log page shows one, its ANSI
colours rendered, its lines numbered. A text a page cuts (a hold reason, a last error, a
summary) opens in the same view.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property
from pathlib import Path

import sqlalchemy as sa
from markupsafe import Markup

from assay.adapters.store.run_logs import LogEntry, read_log
from assay.adapters.store.schema import runs, tasks
from assay.adapters.store.sql import Ledger
from assay.core.vocab import LogRole
from assay.web import ansi, view_run, view_texts
from assay.web.view_models import AttemptView

TASK_TEXTS = {
    "title": "Title",
    "instruction": "Instruction",
    "hold_reason": "Hold reason",
    "last_error": "Last error",
    "diagnostic": "Diagnostic",
}
RUN_TEXTS = {"summary": "Coder summary", "reason": "Run reason"}
HALT_TEXT = "halt:"  # ``halt:NAME``: the evidence a run's halt fired with
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")
# Lines a log view shows at most: its first and its last half of them, with a line between
# that says how many it leaves out (the download holds them all). A text of a few hundred
# thousand short lines made a page of tens of MB, an element a line.
MAX_SHOWN_LINES = 20_000
TOO_LONG = (
    "this log now has more lines than the view shows: reload the page to see its end, "
    "or download it"
)


@dataclass(frozen=True)
class LogPage:
    """One log (or one long text) to show whole: its lines as HTML, where it belongs."""

    title: str
    name: str
    run_id: str | None
    task_id: str
    task_title: str
    role: str | None
    attempt: int | None
    seat: int | None
    size: int
    truncated: bool
    updated_at: datetime | None
    text: str
    download: str  # the file name a download is saved as
    live: bool = False  # its run is still open: the kept copy may still change

    @cached_property  # rendered once: the page asks for them, their count and their cut
    def lines(self) -> list[Markup]:
        return ansi.html_lines(self.text)

    @property
    def numbered(self) -> list[tuple[int, Markup]]:
        """The lines shown, each with its number; a number 0 is the line that says how many
        are left out between the first and the last :data:`MAX_SHOWN_LINES` halves."""
        lines = self.lines
        if len(lines) <= MAX_SHOWN_LINES:
            return list(enumerate(lines, start=1))
        half = MAX_SHOWN_LINES // 2
        gap = len(lines) - 2 * half
        note = Markup(f'<em class="log-gap">… {gap:,} lines not shown here: download the log '
                      "to read them …</em>")  # fmt: skip
        tail = list(enumerate(lines[-half:], start=len(lines) - half + 1))
        return [*enumerate(lines[:half], start=1), (0, note), *tail]

    @property
    def lines_cut(self) -> bool:
        return len(self.lines) > MAX_SHOWN_LINES

    @property
    def sig(self) -> str:
        return text_sig(self.text)

    @property
    def length(self) -> int:
        return len(_normal(self.text))


@dataclass(frozen=True)
class LogUpdate:
    """What a log view that shows ``length`` characters signed ``sig`` must change to show the
    kept copy now: its lines from ``start`` (0-based) replaced by ``lines``; ``length`` and
    ``sig`` those of the copy now. Only the lines that moved are sent when the copy grew by
    an append (the usual case); the whole log when it was replaced (a live copy's window moved,
    the final copy came)."""

    start: int
    lines: list[Markup]
    total: int
    length: int
    sig: str
    live: bool
    note: str | None = None  # why the view stops following (its lines are too many)


def _normal(text: str) -> str:
    return text.replace("\r\n", "\n")  # as html_lines reads it


def text_sig(text: str) -> str:
    return hashlib.blake2b(_normal(text).encode("utf-8", "replace"), digest_size=8).hexdigest()


def log_update(page: LogPage, length: int, sig: str) -> LogUpdate:
    """The change from what the view shows (``length`` characters signed ``sig``) to ``page``."""
    text = _normal(page.text)
    lines = ansi.html_lines(text)
    same = (page.length, page.sig)
    if len(lines) > MAX_SHOWN_LINES:  # the view would outgrow what a page shows: it stops
        return LogUpdate(1 << 31, [], len(lines), length, sig, False, TOO_LONG)
    if same == (length, sig):
        return LogUpdate(len(lines), [], len(lines), *same, page.live)
    start = 0
    if 0 <= length <= len(text) and text_sig(text[:length]) == sig:
        start = text[:length].count("\n")  # the last line shown may have grown: sent again
    # Colours carry across lines: rendered whole, then only the lines from ``start`` are sent.
    return LogUpdate(start, lines[start:], len(lines), *same, page.live)


def download_name(*parts: str) -> str:
    """A file name made of ``parts`` that no header or file system can misread."""
    return _SAFE.sub("_", "-".join(p.replace("/", "-") for p in parts if p))[:200] or "log"


def validator_log(logs: list[LogEntry], attempt: int, seat: int, validator_id: str) -> str | None:
    """The name of the log a validator wrote for one seat's candidate: a command's
    ``validator-<id>.log``, a judge's ``judge-<id>.jsonl`` (the id made safe as each names it)."""
    safe = {re.sub(r"[^A-Za-z0-9_.-]+", "_", validator_id), _SAFE.sub("_", validator_id)}
    wanted = {f"validator-{s}.log" for s in safe} | {f"judge-{s}.jsonl" for s in safe}
    for log in logs:
        here = log.role == LogRole.VALIDATOR and (log.attempt, log.seat) == (attempt, seat)
        if here and log.name.rsplit("/", 1)[-1] in wanted:
            return log.name
    return None


def coder_log(logs: list[LogEntry], attempt: int, seat: int) -> str | None:
    """The seat's main log: its program's output (``*.log``) before a transcript; while it
    runs, the raw stream it writes to (``*.log.out``, then ``*.log.err``)."""
    mine = [
        log.name
        for log in logs
        if log.role == LogRole.CODER and (log.attempt, log.seat) == (attempt, seat)
    ]
    mine.sort(key=lambda name: (not name.endswith(".log"), not name.endswith(".log.out"), name))
    return mine[0] if mine else None


def with_log_links(attempts: list[AttemptView], logs: list[LogEntry]) -> list[AttemptView]:
    """The attempts with each seat's and each validator's log named (None: none kept)."""
    if not logs:
        return attempts
    linked = []
    for a in attempts:
        seats = [replace(s, log=coder_log(logs, s.attempt, s.seat)) for s in a.seats]
        validators = [
            replace(v, log=validator_log(logs, v.attempt, v.seat, v.validator_id))
            for v in a.validators
        ]
        linked.append(replace(a, seats=seats, validators=validators))
    return linked


def _task_of_run(conn: sa.Connection, run_id: str) -> tuple[str, str, bool] | None:
    """The run's task id and title, and whether the run is still open."""
    row = conn.execute(
        sa.select(runs.c.task_id, tasks.c.title, runs.c.finished_at.is_(None))
        .select_from(runs.join(tasks, tasks.c.id == runs.c.task_id))
        .where(runs.c.id == run_id)
    ).first()
    return None if row is None else (str(row[0]), str(row[1]), bool(row[2]))


def log_page(ledger: Ledger, run_id: str, name: str) -> LogPage | None:
    """One of the run's logs from the ledger; None for an unknown run or log."""
    with ledger.read() as conn:
        owner = _task_of_run(conn, run_id)
        entry = read_log(conn, run_id, name) if owner else None
    if owner is None or entry is None:
        return None
    return LogPage(
        title=name,
        name=name,
        run_id=run_id,
        task_id=owner[0],
        task_title=owner[1],
        role=entry.role.value,
        attempt=entry.attempt,
        seat=entry.seat,
        size=entry.size,
        truncated=entry.truncated,
        updated_at=entry.updated_at,
        text=entry.text or "",
        download=download_name(run_id, name),
        live=owner[2],
    )


def task_text(ledger: Ledger, task_id: str, field: str) -> LogPage | None:
    """A task's long text (``TASK_TEXTS``) whole; None for an unknown task, field or none."""
    if field.startswith(view_texts.ACTION):
        from assay.web.view_queue import task_page

        with ledger.read() as conn:
            task = task_page(conn, task_id)
        said = view_texts.task_part(task, field) if task else None
        if task is None or not said:
            return None
        title = f"Reason of move {field.removeprefix(view_texts.ACTION)}"
        return _text_page(title, field, None, task_id, task.row.title, said)
    if field not in TASK_TEXTS:
        return None
    with ledger.read() as conn:
        row = conn.execute(
            sa.select(tasks.c.title, tasks.c[field]).where(tasks.c.id == task_id)
        ).first()
    if row is None or not row[1]:
        return None
    return _text_page(TASK_TEXTS[field], field, None, task_id, str(row[0]), str(row[1]))


def run_text(
    ledger: Ledger, run_id: str, field: str, state_dir: Path | None = None
) -> LogPage | None:
    """A run's long text (``RUN_TEXTS``: its reason, its coder's summary; ``halt:NAME``: the
    evidence its halt fired with, as the run page reads it) whole."""
    halt = field.removeprefix(HALT_TEXT) if field.startswith(HALT_TEXT) else None
    part = view_texts.is_run_part(field)
    rearm = field.startswith(view_texts.REARM)
    if field not in RUN_TEXTS and not halt and not part and not rearm:
        return None
    title = RUN_TEXTS.get(field) or f"Evidence of {halt}"
    with ledger.read() as conn:
        owner = _task_of_run(conn, run_id)
        if owner is None:
            return None
        if rearm:
            run = view_run.build_run_view(conn, run_id, state_dir)
            text = view_texts.rearm_part(run, field) if run else None
            title = f"Evidence of re-arm {field.removeprefix(view_texts.REARM)}"
        elif part:
            run = view_run.build_run_view(conn, run_id, state_dir)
            title, text = view_texts.run_part(run, field) if run else ("", None)
            if text is not None and field.startswith(view_texts.JUDGE_PARTS):
                text = view_texts.judge_part(conn, run_id, field) or text
        elif halt:
            run = view_run.build_run_view(conn, run_id, state_dir)
            found = [h.detail for h in run.halts if h.name == halt] if run else []
            text = found[0] if found else None
        elif field == "reason":
            text = conn.execute(sa.select(runs.c.reason).where(runs.c.id == run_id)).scalar()
        else:
            path = conn.execute(sa.select(runs.c.payload_path).where(runs.c.id == run_id)).scalar()
            payload = view_run.payload_of(conn, run_id, path)
            report = payload.get("coder_report") if payload else None
            text = report.get("summary") if isinstance(report, dict) else None
    if not isinstance(text, str) or not text:
        return None
    return _text_page(title, field, run_id, owner[0], owner[1], text)


def _text_page(
    title: str, field: str, run_id: str | None, task_id: str, task_title: str, text: str
) -> LogPage:
    return LogPage(
        title=title,
        name=field,
        run_id=run_id,
        task_id=task_id,
        task_title=task_title,
        role=None,
        attempt=None,
        seat=None,
        size=len(text.encode("utf-8", "replace")),
        truncated=False,
        updated_at=None,
        text=text,
        download=download_name(run_id or task_id, field) + ".txt",
    )
