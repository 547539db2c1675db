"""What ``assay task list|show`` and ``assay ledger show`` print.

``task list`` prints plain rows (:class:`~assay.adapters.store.task_rows.TaskRow`), which
every backend's read gives (:mod:`assay.adapters.store.quick_read` on a SQLite file before
SQLAlchemy is imported, else the Ledger). ``task show`` and ``ledger show`` read through the
Ledger only (they show the usage journal's sums). This module imports only the standard
library and light assay modules: the models come with the Ledger, when that path is taken.
"""

from __future__ import annotations

import os
import subprocess
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.adapters.git_env import LOCATION_VARS
from assay.adapters.store.names import DATABASE_URL_ENV, HOME_ENV
from assay.cli.table import render, terminal_width
from assay.core.text import printable, shown

if TYPE_CHECKING:
    from collections.abc import Sequence

    from assay.adapters.store.quick_read import QuickLedger
    from assay.adapters.store.records import RunRecord
    from assay.adapters.store.task_rows import TaskRow
    from assay.cli.usage_views import TaskUsage
    from assay.core.tasks import Task

LIST_HEADERS = ("id", "status", "attempts", "title", "note")
_SHRINK = (3, 4)  # title, note: on a narrow terminal these give way, never the id


def quick_ledger() -> tuple[QuickLedger, Path] | None:
    """The workspace's SQLite ledger opened for the quick path, with the workspace's home;
    None when the Ledger must answer (a configured database URL, no repository here, no
    ledger file yet, another revision: see :mod:`~assay.adapters.store.quick_read`)."""
    if os.environ.get(DATABASE_URL_ENV):
        return None
    root = _repo_root()
    if root is None:
        return None  # the Workspace says why, in its words
    from assay.adapters.store.quick_read import NotQuick, QuickLedger

    configured = os.environ.get(HOME_ENV)
    home = Path(configured).absolute() if configured else root / ".assay"
    try:
        return QuickLedger(home / "assay.db"), home
    except NotQuick:
        return None


def list_text(tasks: Sequence[TaskRow], unreadable: list[tuple[str, str]], now: datetime) -> str:
    """``task list``'s table: a row per task, then a row per unreadable one."""
    from assay.cli.explain import error_note, shorten, wait_note

    rows = [
        [
            task.id,
            str(task.status),  # a StrEnum: its value, without the enum's slow attribute
            str(task.attempts),
            task.title,
            wait_note(task.not_before, now)
            or shorten(_reason(task) or error_note(task.last_error, task.status) or "", 60),
        ]
        for task in tasks
    ]
    # shown, never fatal: one bad row hides nothing else
    rows += [[task_id, "unreadable", "", "", problem[:60]] for task_id, problem in unreadable]
    return render(LIST_HEADERS, rows, shrink=_SHRINK, width=terminal_width())


def _reason(task: TaskRow) -> str | None:
    return shown(task.hold_reason) if task.hold_reason else None


def show_document(
    task: Task,
    task_json: dict[str, Any],
    runs: list[RunRecord],
    runs_json: list[dict[str, Any]],
    home: Path,
    now: datetime,
    usage: TaskUsage,
    kept_payload: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``task show --json``: the task, who holds it, its wait, fired halts, the ways back, the
    next step, its runs and what they spent. ``kept_payload``: the newest closed run's payload
    as the ledger keeps it (so a task held on another machine shows what fired there)."""
    from assay.cli import explain, explain_halts

    state_dir = home / "halt-state"
    halts = explain_halts.fired_halts(runs, state_dir, kept_payload) if task.hold_source else []
    ways = explain_halts.ways_back(task, halts, state_dir)
    next_step = explain.next_step(task, now)
    open_runs = {r.id for r in runs if not r.status.terminal}
    if open_runs and open_runs <= gone_runs(runs, home):
        next_step = GONE_NEXT
    return {
        **task_json,
        "held_by": (task.hold_source.value if task.hold_source else None),
        "waiting": task.waiting(now),
        **explain_halts.as_json(halts, ways),
        "next": next_step,
        "runs": runs_json,
        "usage": usage.as_json(),
    }


GONE_NEXT = (
    "its run's process is gone: `assay run --resume` (or `assay serve`) closes the run and "
    "runs the task again"
)
_OPEN = "in progress"
_GONE = "open, but its process is gone: `assay run --resume` closes it"


def gone_runs(runs: list[RunRecord], home: Path) -> frozenset[str]:
    """The open runs whose process is gone: their folder here has a lock nobody holds. A run
    with no folder on this machine (a Temporal worker's elsewhere) is never said gone."""
    from assay.engine.local.run_lock import run_is_alive

    folders = {r.id: home / "runs" / r.id for r in runs if not r.status.terminal}
    return frozenset(
        run_id
        for run_id, folder in folders.items()
        if (folder / "lock").is_file() and not run_is_alive(folder)
    )


def run_line(record: RunRecord, gone: frozenset[str]) -> str:
    """A run as ``task show`` says it: its status and reason once closed; while open, whether
    it is in progress or its process is gone (the ledger's step names are not the user's)."""
    from assay.cli.outcome import run_said

    if record.status.terminal:
        return run_said(record.status.value, record.reason)
    return _GONE if record.id in gone else _OPEN


def show_text(
    task: Task,
    runs: list[RunRecord],
    document: dict[str, Any],
    now: datetime,
    usage: TaskUsage,
    gone: frozenset[str] = frozenset(),
) -> str:
    """``task show``'s lines, from the task, its runs (``gone``: the open ones whose process
    is gone, :func:`gone_runs`), what they spent and its :func:`show_document`."""
    from assay.cli import explain

    lines = [
        f"{shown(task.id)}: {shown(task.title)}",
        f"status: {task.status.value}  attempts: {task.attempts}",
    ]
    if task.repository is not None or task.branch is not None:  # where it runs: only there
        place = f"repository: {shown(task.repository or 'any')}"
        lines.append(place + (f"  branch: {shown(task.branch)}" if task.branch else ""))
    if (who := explain.holder(task)) is not None:
        lines.append(f"held by {who}: {shown(task.hold_reason or '')}")
    if (note := explain.wait_note(task.not_before, now)) is not None:
        cause = shown(explain.wait_cause(task))
        lines.append(f"{note} for {cause} (that run was refunded: no attempt spent)")
    if (error := explain.error_note(task.last_error, task.status)) is not None:
        lines.append(error)
    for record in runs:
        lines.append(f"  run {shown(record.id)}: {shown(run_line(record, gone))}")
        if record.payload_path:
            lines.append(f"    payload: {shown(record.payload_path)}")
        if (spent := usage.run_line(record.id)) is not None:
            lines.append(f"    usage: {spent}")
    lines.append(usage.total_line())
    for halt in document["fired_halts"]:
        lines.append(
            f"{shown(halt['name'])} fired ({shown(halt['severity'])}, now "
            f"{shown(halt['lifecycle'] or 'unknown')}) in run {shown(halt['run_id'])}: "
            f"{shown(halt['detail'])}"
        )
    lines.append(f"next: {shown(document['next'])}")
    for number, way in enumerate(document["ways_back"], start=1):
        lines.append(f"  way back {number}: {shown(way['summary'])}")
        lines.extend(f"      {shown(command)}" for command in way["commands"])
    return _printed(lines)


# What each stage of the convergence ledger counts, and its verdicts, in the README's words.
_STAGE_COUNTS = {
    "task": "run(s) spent",
    "recover": "recovery wave(s)",
    "dispatch": "coder dispatch(es)",
    "judge": "judge call(s)",
    "land": "landing(s) tried",
}
_VERDICTS = {
    "advance": "advance (passed on)",
    "loop_back": "loop back (tried again)",
    "escalate": "escalate (to a human)",
    "unvisited": "",  # no verdict yet: nothing to say
}
# The two stages a run gives a verdict to, said as what they mean there.
_STAGE_VERDICTS = {
    ("recover", "advance"): "advance (the last attempt passed)",
    ("recover", "loop_back"): "loop back (the last attempt was blocked)",
    ("recover", "escalate"): "escalate (the last attempt reached no verdict)",
    ("task", "advance"): "advance (done)",
    ("task", "loop_back"): "loop back (runnable again)",
    ("task", "escalate"): "escalate (held for a human)",
}


def ledger_text(document: dict[str, Any], usage: TaskUsage) -> str:
    """``ledger show``'s lines, from the convergence ledger's JSON document and what the
    task's runs spent."""
    head = f"task {shown(document['task_id'])}: {document['laps']} judged attempt(s) in all"
    if document["converged"]:
        head += "; converged (its last run was done)"
    if document["oscillating"]:
        head += (
            "; its newest attempt repeats the failures of an attempt just before it"
            " (stuck, or going in circles)"
        )
    lines = [head]
    for stage, record in sorted(document["stage_state"].items()):
        counted = f"{record['attempts']} {_STAGE_COUNTS.get(stage, 'attempt(s)')}"
        given = str(record["last_verdict"])
        verdict = _STAGE_VERDICTS.get((stage, given)) or _VERDICTS.get(given, shown(given))
        last = f"last verdict: {verdict}" if verdict else ""
        lines.append(f"  {shown(stage):<9} {counted:<22} {last}".rstrip())
    for name, foreign in sorted(document["foreign_stages"].items()):
        signatures = foreign["last_finding_signatures"]
        unreadable = [s for s in signatures if s.startswith("(unreadable")]
        why = unreadable[0] if unreadable else "not known to this version of assay"
        lines.append(
            f"  {shown(name):<9} {foreign['attempts']} attempt(s), last verdict "
            f"{shown(str(foreign['last_verdict']))} ({shown(why)}; shown as stored, not counted)"
        )
    lines.append(usage.total_line())
    lines.extend(f"  run {shown(run_id)}: {usage.run_line(run_id)}" for run_id in usage.runs)
    return _printed(lines)


def _printed(lines: list[str]) -> str:
    """The lines as text for a terminal. Stored text (a title, a reason, an error, a halt's
    evidence) is put in through :func:`shown`, so no value starts a line of its own; this
    also keeps any escape sequence of assay's own text from the terminal."""
    return "".join(printable(line) + "\n" for line in lines)


def _repo_root() -> Path | None:
    """``git rev-parse --show-toplevel`` as the git adapter runs it (without importing it and
    the models it brings); None when git cannot say."""
    env = {k: v for k, v in os.environ.items() if k not in LOCATION_VARS}
    env["LC_ALL"] = "C"
    try:
        done = subprocess.run(
            ["git", "-C", str(Path.cwd()), "rev-parse", "--show-toplevel"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=env,
            timeout=30,
            check=False,
            start_new_session=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    top = done.stdout.decode("utf-8", "replace").strip()
    return Path(top) if done.returncode == 0 and top else None
