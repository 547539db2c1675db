"""The task commands' reads of the ledger on the standard library's ``sqlite3``.

Importing SQLAlchemy and pydantic takes longer than these commands may take in all, so on a
SQLite ledger at :data:`REVISION` they read here, through a read-only connection, and build
the same documents the models would. Whatever this module is not sure of raises
:class:`NotQuick` and the caller asks the :class:`~assay.adapters.store.sql.Ledger`, whose
answer is the reference: no ledger file yet (the Ledger creates it), another revision or
backend, a locked file, or a row the models might judge differently (a hand-edited value, a
status this version does not know — the Ledger reports such rows as unreadable). A test reads
one ledger both ways and compares the commands' output.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from assay.adapters.store.quick_rows import (
    NotQuick,
    RunRow,
    TaskRow,
    checked_time,
    optional_time,
    parse_time,
)
from assay.core.laps import MAX_LAP_HISTORY, finding_signatures, oscillating
from assay.core.vocab import HoldSource, RunStatus, SettleRow, Stage, StageVerdict, TaskStatus

REVISION = "0006"
"""The schema revision these queries were written for (a test pins it to the Ledger's head)."""
BUSY_TIMEOUT_SECONDS = 0.25
"""Reads in WAL mode do not wait for writers; a file locked longer than this goes to the
Ledger, which waits ``$ASSAY_DB_TIMEOUT`` and names the lock."""

_TASK_STATUS = {s.value: s for s in TaskStatus}
_HOLD_SOURCE = {s.value: s for s in HoldSource}
_RUN_STATUS = {s.value: s for s in RunStatus}
_SETTLE_ROW = {s.value: s for s in SettleRow}
_OPTIONAL_TEXT = (str, type(None))
_KNOWN_STAGES = frozenset(s.value for s in Stage)
_KNOWN_VERDICTS = frozenset(v.value for v in StageVerdict)

# The Ledger's own statements (statements.load_tasks, Ledger.runs, convergence_ledger) in SQL,
# so rows come back in the same order.
_TASKS = (
    "SELECT tasks.id, tasks.title, tasks.instruction, tasks.status, tasks.last_error,"
    " tasks.hold_reason, tasks.hold_source, tasks.diagnostic, tasks.created_at,"
    " tasks.updated_at, tasks.not_before, coalesce(stage_records.attempts, 0)"
    " FROM tasks LEFT OUTER JOIN stage_records"
    " ON stage_records.task_id = tasks.id AND stage_records.stage = 'task'"
    " WHERE {where} ORDER BY tasks.created_at, tasks.id"
)
_RUN_IDS = (
    "SELECT runs.task_id, runs.id FROM runs"
    " WHERE runs.task_id IN (SELECT tasks.id FROM tasks WHERE {where})"
    " ORDER BY runs.started_at, runs.id"
)
_RUNS = (
    "SELECT id, task_id, dispatch_id, status, started_at, finished_at, settle_row,"
    " attempt_spent, task_status, reason, payload_path"
    " FROM runs WHERE runs.task_id = ? ORDER BY runs.started_at, runs.id"
)
_STAGES = (
    "SELECT stage_records.stage, stage_records.attempts, stage_records.last_verdict,"
    " stage_records.last_finding_signatures FROM stage_records WHERE stage_records.task_id = ?"
)
_LAPS_OF_TASK = (
    "SELECT attempts.finding_signatures FROM attempts JOIN runs ON runs.id = attempts.run_id"
    " WHERE runs.task_id = ?"
)


class QuickLedger:
    """A read-only view of a SQLite ledger file; each method reads one snapshot."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise NotQuick(f"no ledger file at {path} yet")
        self._uri = f"{path.absolute().as_uri()}?mode=ro"
        with self._read() as conn:
            found = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        if found != [(REVISION,)]:
            raise NotQuick(f"the ledger is at revision {found!r}, not {REVISION}")

    def tasks(self, status: TaskStatus | None = None) -> list[TaskRow]:
        """Every task (or those with ``status``) oldest first, as ``Ledger.scan_tasks``."""
        where, params = ("1 = 1", ()) if status is None else ("tasks.status = ?", (status.value,))
        with self._read() as conn:
            return _task_rows(conn, where, params)

    def task(self, task_id: str) -> TaskRow | None:
        """The task, or None when the ledger has no such task."""
        with self._read() as conn:
            found = _task_rows(conn, "tasks.id = ?", (task_id,))
        return found[0] if found else None

    def runs(self, task_id: str) -> list[RunRow]:
        """The task's runs in the order they started, as ``Ledger.runs``."""
        with self._read() as conn:
            return [_run_row(row) for row in conn.execute(_RUNS, (task_id,))]

    def convergence(self, task_id: str) -> dict[str, Any] | None:
        """The task's convergence ledger as ``Ledger.ledger(task_id).model_dump(mode="json")``
        would print it; None when the ledger has no such task."""
        with self._read() as conn:
            if conn.execute("SELECT id FROM tasks WHERE id = ?", (task_id,)).fetchone() is None:
                return None
            stages = conn.execute(_STAGES, (task_id,)).fetchall()
            laps = conn.execute(
                f"SELECT count(*) FROM ({_LAPS_OF_TASK}) AS anon_1", (task_id,)
            ).fetchone()[0]
            newest = conn.execute(
                f"{_LAPS_OF_TASK} ORDER BY runs.started_at DESC, runs.id DESC,"
                " attempts.attempt DESC LIMIT ?",
                (task_id, MAX_LAP_HISTORY),
            ).fetchall()
        return _convergence(task_id, stages, laps, [r[0] for r in reversed(newest)])

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = sqlite3.connect(
                self._uri, uri=True, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None
            )
        except sqlite3.Error as exc:
            raise NotQuick(str(exc)) from exc
        try:
            conn.execute("BEGIN")  # one snapshot for every query of the call
            yield conn
        except sqlite3.Error as exc:  # locked, a table missing, not a database, ...
            raise NotQuick(str(exc)) from exc
        finally:
            conn.close()


def _task_rows(conn: sqlite3.Connection, where: str, params: tuple[str, ...]) -> list[TaskRow]:
    run_ids: dict[str, list[str]] = {}
    for task_id, run_id in conn.execute(_RUN_IDS.format(where=where), params):
        run_ids.setdefault(task_id, []).append(_text(run_id))
    return [_task_row(row, run_ids) for row in conn.execute(_TASKS.format(where=where), params)]


def _task_row(row: tuple[Any, ...], run_ids: dict[str, list[str]]) -> TaskRow:
    # Checked inline, not through the helpers below: this runs once per task of a list.
    task_id, title, instruction, status, last_error, hold_reason, hold_source = row[:7]
    diagnostic, created_at, updated_at, not_before, attempts = row[7:]
    if not (
        type(task_id) is str
        and task_id
        and type(title) is str
        and type(instruction) is str
        and type(status) is str
        and status in _TASK_STATUS
        and (hold_source is None or (type(hold_source) is str and hold_source in _HOLD_SOURCE))
        and type(last_error) in _OPTIONAL_TEXT
        and type(hold_reason) in _OPTIONAL_TEXT
        and type(diagnostic) in _OPTIONAL_TEXT
        and type(attempts) is int
        and attempts >= 0
    ):
        raise NotQuick(f"task {task_id!r}: a value the models would judge")
    return TaskRow(
        task_id,
        title,
        instruction,
        _TASK_STATUS[status],
        attempts,
        last_error,
        hold_reason,
        None if hold_source is None else _HOLD_SOURCE[hold_source],
        diagnostic,
        run_ids.get(task_id, []),
        None if not_before is None else parse_time(not_before),
        checked_time(created_at),
        checked_time(updated_at),
    )


def _run_row(row: tuple[Any, ...]) -> RunRow:
    run_id, task_id, dispatch_id, status, started_at, finished_at, settle_row = row[:7]
    attempt_spent, task_status, reason, payload_path = row[7:]
    if attempt_spent is not None and (
        type(attempt_spent) is not int or attempt_spent not in (0, 1)
    ):
        raise NotQuick(f"run {run_id!r}: attempt_spent {attempt_spent!r}")
    return RunRow(
        id=_text(run_id),
        task_id=_text(task_id),
        dispatch_id=_optional_text(dispatch_id),
        status=_member(_RUN_STATUS, status),
        started_at=parse_time(started_at),
        finished_at=optional_time(finished_at),
        settle_row=None if settle_row is None else _member(_SETTLE_ROW, settle_row),
        attempt_spent=None if attempt_spent is None else bool(attempt_spent),
        task_status=None if task_status is None else _member(_TASK_STATUS, task_status),
        reason=_optional_text(reason),
        payload_path=_optional_text(payload_path),
    )


def _convergence(
    task_id: str, stages: list[tuple[Any, ...]], laps: int, lap_values: list[Any]
) -> dict[str, Any]:
    """``convergence.convergence_ledger``'s rules: a stage row this version knows is counted;
    one it does not (a newer stage or verdict, unreadable signatures) is shown as stored."""
    stage_state: dict[str, Any] = {}
    foreign: dict[str, Any] = {}
    for stage, attempts, verdict, stored in stages:
        if type(attempts) is not int or attempts < 0:
            raise NotQuick(f"task {task_id!r}: stage {stage!r} attempts {attempts!r}")
        signatures = _signature_list(stored)
        if stage in _KNOWN_STAGES and verdict in _KNOWN_VERDICTS and signatures is not None:
            stage_state[stage] = {
                "attempts": attempts,
                "last_verdict": verdict,
                "last_finding_signatures": finding_signatures(signatures),
            }
        else:
            if signatures is None:
                shown = [f"(unreadable: {str(stored)[:60]!r} is not a list of signatures)"]
            else:
                shown = signatures
            foreign[str(stage)] = {
                "attempts": attempts,
                "last_verdict": str(verdict),
                "last_finding_signatures": shown,
            }
    lap_signatures = [finding_signatures(_signature_list(v) or []) for v in lap_values]
    task = stage_state.get(Stage.TASK.value)
    return {
        "task_id": task_id,
        "stage_state": stage_state,
        "laps": laps,
        "lap_signatures": lap_signatures,
        "converged": task is not None and task["last_verdict"] == StageVerdict.ADVANCE.value,
        "oscillating": oscillating(lap_signatures),
        "foreign_stages": foreign,
    }


def _signature_list(value: Any) -> list[str] | None:
    """``statements.signature_list``: the stored JSON text parsed, None unless a list of str."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        return None
    return value


def _member(members: dict[str, Any], value: object) -> Any:
    if type(value) is not str or value not in members:
        raise NotQuick(f"{value!r} is not a value this version knows")
    return members[value]


def _text(value: object) -> str:
    if type(value) is not str:
        raise NotQuick(f"{value!r} is not text")
    return value


def _optional_text(value: object) -> str | None:
    return None if value is None else _text(value)
