"""What ``assay task list`` prints a task from, on every backend: :class:`TaskRow`, built by
:func:`read_rows` from the rows of :mod:`.task_sql`'s query as a driver returns them. The
standard library's ``sqlite3`` (:mod:`.quick_read`, before SQLAlchemy is imported) and the
Ledger (:meth:`~assay.adapters.store.sql.Ledger.scan_task_rows`, through SQLAlchemy on SQLite or
PostgreSQL) hand it the same columns; what still differs is each driver's values (a time is
text from SQLite, a datetime from PostgreSQL), and :func:`read_rows` takes both.

A row that is not a valid task (edited by hand, written by a newer version) is returned as
(id, what is wrong) beside the others, as the Ledger's models report it, never raised.

Plain classes: ``dataclasses`` imports ``inspect`` and the tokenizer, a tenth of what
``task list`` may take in all; pydantic far more.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from assay.core.vocab import HoldSource, TaskStatus

_TASK_STATUS = {s.value: s for s in TaskStatus}
_HOLD_SOURCE = {s.value: s for s in HoldSource}
_OPTIONAL_TEXT = (str, type(None))


class TaskRow:
    """A task as ``task list`` prints it: :class:`assay.core.tasks.Task`'s fields without
    pydantic, and :meth:`as_json`, which writes what ``Task.model_dump(mode="json")`` would (a
    test holds the two together)."""

    __slots__ = (
        "attempts",
        "branch",
        "diagnostic",
        "hold_reason",
        "hold_source",
        "id",
        "instruction",
        "last_error",
        "not_before",
        "repository",
        "run_ids",
        "status",
        "stored_created_at",  # as stored (checked): a list prints 10,000 of each
        "stored_updated_at",
        "title",
    )

    def __init__(
        self,
        id: str,
        title: str,
        instruction: str,
        status: TaskStatus,
        attempts: int,
        last_error: str | None,
        hold_reason: str | None,
        hold_source: HoldSource | None,
        diagnostic: str | None,
        run_ids: list[str],
        not_before: datetime | None,
        stored_created_at: str,
        stored_updated_at: str,
        repository: str | None = None,
        branch: str | None = None,
    ) -> None:
        self.id = id
        self.title = title
        self.instruction = instruction
        self.status = status
        self.attempts = attempts
        self.last_error = last_error
        self.hold_reason = hold_reason
        self.hold_source = hold_source
        self.diagnostic = diagnostic
        self.run_ids = run_ids
        self.not_before = not_before
        self.stored_created_at = stored_created_at
        self.stored_updated_at = stored_updated_at
        self.repository = repository
        self.branch = branch

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "instruction": self.instruction,
            "status": self.status.value,
            "attempts": self.attempts,
            "last_error": self.last_error,
            "hold_reason": self.hold_reason,
            "hold_source": self.hold_source.value if self.hold_source else None,
            "diagnostic": self.diagnostic,
            "run_ids": list(self.run_ids),
            "not_before": json_time(self.not_before),
            "created_at": json_stored_time(self.stored_created_at),
            "updated_at": json_stored_time(self.stored_updated_at),
            "repository": self.repository,
            "branch": self.branch,
        }


class BadValue(ValueError):
    """A stored value that is not what its column holds (see :func:`read_rows`)."""

    def __init__(self, column: str, value: object, why: str) -> None:
        shown = f" {value!r}"[:60] if isinstance(value, str | int | float) else ""
        super().__init__(f"{column}{shown}: {why}")


def read_rows(
    rows: Iterable[Sequence[object]], run_ids: Iterable[Sequence[object]]
) -> tuple[list[TaskRow], list[tuple[str, str]]]:
    """The tasks of ``rows`` (:data:`.task_sql.TASK_FIELDS` each), each with its ids from the
    ``(task id, run id)`` pairs of ``run_ids``, and the rows that are not valid tasks as
    (id, what is wrong)."""
    runs: dict[object, list[str]] = {}
    bad_runs: dict[object, object] = {}
    for task_id, run_id in run_ids:
        if type(run_id) is str:
            runs.setdefault(task_id, []).append(run_id)
        else:
            bad_runs.setdefault(task_id, run_id)
    found: list[TaskRow] = []
    unreadable: list[tuple[str, str]] = []
    for row in rows:
        try:
            if row[0] in bad_runs:
                raise BadValue("run_ids", bad_runs[row[0]], "not a run id")
            found.append(task_row(row, runs.get(row[0], [])))
        except BadValue as exc:
            unreadable.append((str(row[0]), str(exc)))
    return found, unreadable


def task_row(row: Sequence[object], run_ids: list[str]) -> TaskRow:
    """One row of :data:`.task_sql.TASK_FIELDS` as a task; raises :class:`BadValue`."""
    task_id, title, instruction, status, last_error, hold_reason, hold_source = row[:7]
    diagnostic, created_at, updated_at, not_before, repository, branch, attempts = row[7:]
    # Checked inline, each at once: this runs once per task of a list of thousands.
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
        and type(repository) in _OPTIONAL_TEXT
        and type(branch) in _OPTIONAL_TEXT
        and type(attempts) is int
        and attempts >= 0
    ):
        raise _first_problem(row)
    return TaskRow(
        task_id,
        title,
        instruction,
        _TASK_STATUS[status],
        attempts,
        last_error,  # type: ignore[arg-type]  # (checked above)
        hold_reason,  # type: ignore[arg-type]
        None if hold_source is None else _HOLD_SOURCE[hold_source],
        diagnostic,  # type: ignore[arg-type]
        run_ids,
        None if not_before is None else _moment(not_before, "not_before"),
        stored_time(created_at, "created_at"),
        stored_time(updated_at, "updated_at"),
        repository,  # type: ignore[arg-type]
        branch,  # type: ignore[arg-type]
    )


def _first_problem(row: Sequence[object]) -> BadValue:
    """What is wrong with a row :func:`task_row` refused, said of its first bad column."""
    task_id, title, instruction, status, last_error, hold_reason, hold_source = row[:7]
    diagnostic, repository, branch, attempts = row[7], row[11], row[12], row[13]
    text = {"title": title, "instruction": instruction}
    optional = {
        "last_error": last_error,
        "hold_reason": hold_reason,
        "diagnostic": diagnostic,
        "repository": repository,
        "branch": branch,
    }
    if type(task_id) is not str or not task_id:
        return BadValue("id", task_id, "not a task id")
    for column, value in text.items():
        if type(value) is not str:
            return BadValue(column, value, "not text")
    if status not in _TASK_STATUS:
        return BadValue("status", status, f"not one of {', '.join(_TASK_STATUS)}")
    if hold_source is not None and hold_source not in _HOLD_SOURCE:
        return BadValue("hold_source", hold_source, f"not one of {', '.join(_HOLD_SOURCE)}")
    for column, value in optional.items():
        if type(value) not in _OPTIONAL_TEXT:
            return BadValue(column, value, "not text")
    return BadValue("attempts", attempts, "not a count")


def stored_time(value: object, column: str) -> str:
    """A stored time as text: as stored when the driver gave text (SQLite), checked as
    ``schema.UTCDateTime`` would read it; else (PostgreSQL's driver gives a datetime) in the
    form SQLAlchemy writes on SQLite."""
    if isinstance(value, datetime):
        return _moment(value, column).strftime("%Y-%m-%d %H:%M:%S.%f")
    if type(value) is not str:
        raise BadValue(column, value, "not a time")
    try:
        datetime.fromisoformat(value)
    except ValueError as exc:
        raise BadValue(column, value, "not a time") from exc
    return value


def _moment(value: object, column: str) -> datetime:
    """A stored time (text or a datetime) as ``schema.UTCDateTime`` reads it: naive is UTC, an
    offset is converted to UTC."""
    if isinstance(value, datetime):
        moment = value
    elif type(value) is str:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError as exc:
            raise BadValue(column, value, "not a time") from exc
    else:
        raise BadValue(column, value, "not a time")
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def json_stored_time(value: str) -> str:
    """:func:`json_time` of a stored time; the form SQLAlchemy writes
    (``2026-01-02 03:04:05.000000``, naive UTC) is rewritten without parsing it."""
    if len(value) == 26 and value[10] == " " and value[19] == ".":
        fraction = "" if value.endswith(".000000") else value[19:]
        return f"{value[:10]}T{value[11:19]}{fraction}Z"
    return _moment(value, "time").isoformat().replace("+00:00", "Z")  # (checked when read)


def json_time(value: datetime | None) -> str | None:
    """A UTC time as pydantic's JSON mode writes it: ``2026-01-02T03:04:05[.ffffff]Z``."""
    if value is None:
        return None
    return value.isoformat().replace("+00:00", "Z")
