"""What the queue filters and sorts by, kept on each task's row so a page over 100,000 tasks
reads one row per task: ``tasks.coders`` (the coders its contract names), ``cost_usd`` and
``cost_unknown`` (its dispatches' known cost, and how many have an unknown one), and
``run_seconds`` (the time its closed runs took), filled from the rows they sum; indexes for the
sorts by cost, time spent and last update; on PostgreSQL, trigram indexes for the queue's text
search when the ``pg_trgm`` extension can be created (without it the search still works, by
reading every row).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SEARCHED = ("title", "hold_reason", "last_error", "id")  # each, so an OR of them is indexed

# A dispatch's cost is unknown when it reported no usage, no cost, or its newest row came
# without one (as the usage journal's fold counts it); its known cost is what it reported.
_DISPATCHES = """
    SELECT g.known AS known,
           CASE WHEN g.reported = 1 AND g.costs > 0 AND n.priced THEN 0 ELSE 1 END AS unknown
    FROM (SELECT max(u.id) AS newest,
                 max(CASE WHEN u.reported THEN 1 ELSE 0 END) AS reported,
                 count(u.cost_usd) AS costs,
                 coalesce(sum(u.cost_usd), 0.0) AS known
          FROM usage u WHERE u.task_id = tasks.id GROUP BY u.run_id, u.dispatch) g
    JOIN usage n ON n.id = g.newest
"""
_SECONDS = {
    "postgresql": "extract(epoch FROM r.finished_at - r.started_at)",
    "sqlite": "round((julianday(r.finished_at) - julianday(r.started_at)) * 86400.0, 3)",
}


def coders_text(contract: Any) -> str | None:
    """``|kind=claude|model=opus-4|``: the coders a stored contract names (as the ledger
    writes it from now on)."""
    if isinstance(contract, str):
        try:
            contract = json.loads(contract)
        except ValueError:
            return None
    if not isinstance(contract, dict):
        return None
    named = contract.get("coder")
    parts: list[str] = []
    for entry in named if isinstance(named, list) else [named]:
        if isinstance(entry, str):
            parts.append(f"kind={entry}")
        elif isinstance(entry, dict):
            for key in ("kind", "model"):
                value = entry.get(key)
                if isinstance(value, str) and value:
                    parts.append(f"{key}={value}")
    return "|" + "".join(p.replace("|", "/") + "|" for p in parts) if parts else None


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.add_column("tasks", sa.Column("coders", sa.Text()))
    op.add_column("tasks", sa.Column("cost_usd", sa.Float(), nullable=False, server_default="0"))
    op.add_column(
        "tasks", sa.Column("cost_unknown", sa.Integer(), nullable=False, server_default="0")
    )
    op.add_column("tasks", sa.Column("run_seconds", sa.Float(), nullable=False, server_default="0"))
    conn = op.get_bind()
    named = [
        {"k": task_id, "c": text}
        for task_id, contract in conn.execute(
            sa.text("SELECT id, contract FROM tasks WHERE contract IS NOT NULL")
        )
        if (text := coders_text(contract)) is not None
    ]
    if named:
        conn.execute(sa.text("UPDATE tasks SET coders = :c WHERE id = :k"), named)
    conn.execute(
        sa.text(
            f"UPDATE tasks SET"
            f" cost_usd = (SELECT coalesce(sum(d.known), 0.0) FROM ({_DISPATCHES}) d),"
            f" cost_unknown = (SELECT coalesce(sum(d.unknown), 0) FROM ({_DISPATCHES}) d),"
            f" run_seconds = (SELECT coalesce(sum({_SECONDS[dialect]}), 0.0) FROM runs r"
            f"  WHERE r.task_id = tasks.id AND r.finished_at IS NOT NULL)"
        )
    )
    op.create_index("ix_tasks_cost", "tasks", ["cost_usd", "created_at", "id"])
    op.create_index("ix_tasks_run_seconds", "tasks", ["run_seconds", "created_at", "id"])
    op.create_index("ix_tasks_updated", "tasks", ["updated_at", "created_at", "id"])
    # The coder filter's LIKE reads this narrow index (with what a status and a sort need)
    # instead of every row.
    coders_index = ["coders", "created_at", "id", "status", "updated_at", "cost_usd", "run_seconds"]
    op.create_index("ix_tasks_coders", "tasks", coders_index)
    where = _trigrams(conn) if dialect == "postgresql" else None
    if where is not None:
        for column in SEARCHED:
            op.execute(
                f"CREATE INDEX ix_tasks_{column}_trgm ON tasks"
                f' USING gin ({column} "{where}".gin_trgm_ops)'
            )


def _trigrams(conn: sa.Connection) -> str | None:
    """The schema ``pg_trgm`` is in, created in ``public`` if it is not there yet; None when it
    cannot be (tried in a savepoint, so a role that may not create it leaves the migration's
    transaction usable). Named, since the ledger's own schema may not be on the search path."""
    try:
        with conn.begin_nested():
            conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public"))
    except sa.exc.DBAPIError:
        return None
    found = conn.execute(
        sa.text(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
            " WHERE e.extname = 'pg_trgm'"
        )
    ).scalar()
    return str(found) if found is not None else None


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for column in SEARCHED:
            op.execute(f"DROP INDEX IF EXISTS ix_tasks_{column}_trgm")
    op.drop_index("ix_tasks_coders", "tasks")
    op.drop_index("ix_tasks_updated", "tasks")
    op.drop_index("ix_tasks_run_seconds", "tasks")
    op.drop_index("ix_tasks_cost", "tasks")
    # ALTER TABLE DROP COLUMN (SQLite 3.35+): a batch copy of tasks would trip its foreign keys.
    for column in ("run_seconds", "cost_unknown", "cost_usd", "coders"):
        op.drop_column("tasks", column)
