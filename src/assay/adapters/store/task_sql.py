"""The one SQL text tasks are read with: by the Ledger (:func:`.statements.load_tasks` into
models, :func:`.statements.load_task_rows` into ``task list``'s rows, through SQLAlchemy on any
backend) and by ``assay task list`` on a SQLite ledger (:mod:`.quick_read`, through the
standard library's ``sqlite3``, which SQLAlchemy's import alone would outlast); the rows of
both are built by :func:`.task_rows.read_rows`.

Each query is a ``(where, params)`` pair with named parameters (``:status``), a style both
``sqlite3`` and SQLAlchemy's ``text()`` bind on every backend. Standard library only.
"""

from __future__ import annotations

from enum import Enum

TASK_FIELDS = (
    "id",
    "title",
    "instruction",
    "status",
    "last_error",
    "hold_reason",
    "hold_source",
    "diagnostic",
    "created_at",
    "updated_at",
    "not_before",
    "repository",
    "branch",
    "attempts",
)
"""The columns a task is read from, in the order each row holds them (not its contract, read
alone when a run needs it); ``attempts`` is its ``task`` stage record's count, else 0."""

_TASKS = (
    "SELECT "
    + ", ".join(f"tasks.{name}" for name in TASK_FIELDS[:-1])
    + ", coalesce(stage_records.attempts, 0) AS attempts"
    " FROM tasks LEFT OUTER JOIN stage_records"
    " ON stage_records.task_id = tasks.id AND stage_records.stage = 'task'"
    " WHERE {where} ORDER BY tasks.created_at, tasks.id"
)
_RUN_IDS = (
    "SELECT runs.task_id, runs.id FROM runs"
    " WHERE runs.task_id IN (SELECT tasks.id FROM tasks WHERE {where})"
    " ORDER BY runs.started_at, runs.id"
)

Chosen = tuple[str, dict[str, str]]
"""Which tasks: a WHERE clause on ``tasks`` and its named parameters."""

EVERY_TASK: Chosen = ("1 = 1", {})


def with_status(status: str) -> Chosen:
    return "tasks.status = :status", {"status": status}


def with_id(task_id: str) -> Chosen:
    return "tasks.id = :task_id", {"task_id": task_id}


class Everywhere(Enum):
    """Tasks of every repository: not a worker's pick (see :func:`runs_in`)."""

    EVERY = "every"


def all_of(*chosen: Chosen) -> Chosen:
    """The tasks every one of ``chosen`` picks."""
    where = " AND ".join(f"({part[0]})" for part in chosen)
    params = {key: value for part in chosen for key, value in part[1].items()}
    return where, params


def runs_in(repository: str | None) -> Chosen:
    """The tasks a worker of ``repository`` may run: its own and those that name none."""
    if repository is None:
        return "tasks.repository IS NULL", {}
    return (
        "(tasks.repository IS NULL OR tasks.repository = :repository)",
        {"repository": repository},
    )


def tasks_sql(chosen: Chosen) -> str:
    """The chosen tasks, oldest first: a row of :data:`TASK_FIELDS` each."""
    return _TASKS.format(where=chosen[0])


def run_ids_sql(chosen: Chosen) -> str:
    """``(task id, run id)`` of the chosen tasks' runs, in the order they started."""
    return _RUN_IDS.format(where=chosen[0])
