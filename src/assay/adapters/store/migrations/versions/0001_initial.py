"""The first ledger schema: tasks, runs, attempts, dispatches, stage records, events.

Frozen: later changes go in new revisions. The events table refuses UPDATE and DELETE with a
trigger on both backends, so "append-only" is a property of the database, not a convention.

Revision ID: 0001
Revises:
Create Date: 2026-01-01
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = 200
TOKEN = 32


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _when() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(NAME), primary_key=True),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("instruction", sa.Text(), nullable=False),
        sa.Column("status", sa.String(TOKEN), nullable=False),
        sa.Column("last_error", sa.Text()),
        sa.Column("hold_reason", sa.Text()),
        sa.Column("hold_source", sa.String(TOKEN)),
        sa.Column("diagnostic", sa.Text()),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("updated_at", _when(), nullable=False),
    )
    op.create_index("ix_tasks_status", "tasks", ["status"])
    op.create_table(
        "runs",
        sa.Column("id", sa.String(NAME), primary_key=True),
        sa.Column("task_id", sa.String(NAME), sa.ForeignKey("tasks.id"), nullable=False),
        sa.Column("dispatch_id", sa.String(NAME)),
        sa.Column("status", sa.String(TOKEN), nullable=False),
        sa.Column("settle_row", sa.String(TOKEN)),
        sa.Column("attempt_spent", sa.Boolean()),
        sa.Column("task_status", sa.String(TOKEN)),
        sa.Column("reason", sa.Text()),
        sa.Column("payload_path", sa.Text()),
        sa.Column("started_at", _when(), nullable=False),
        sa.Column("finished_at", _when()),
    )
    op.create_index("ix_runs_task_started", "runs", ["task_id", "started_at"])
    op.create_table(
        "attempts",
        sa.Column("run_id", sa.String(NAME), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("attempt", sa.Integer(), primary_key=True),
        sa.Column("outcome", sa.String(TOKEN), nullable=False),
        sa.Column("failures", _json(), nullable=False),
        sa.Column("finding_signatures", _json(), nullable=False),
        sa.CheckConstraint("attempt >= 1", name="ck_attempts_attempt_positive"),
    )
    op.create_table(
        "dispatches",
        sa.Column("id", sa.String(NAME), primary_key=True),
        sa.Column("run_id", sa.String(NAME), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("seat", sa.Integer(), nullable=False),
        sa.Column("coder", sa.String(NAME), nullable=False),
        sa.Column("label", sa.String(TOKEN)),
        sa.Column("viable", sa.Boolean(), nullable=False),
        sa.Column("lost_to_quota", sa.Boolean(), nullable=False),
        sa.Column("stop_reason", sa.String(TOKEN)),
        sa.Column("files_changed", sa.Integer(), nullable=False),
        sa.Column("tokens_used", sa.BigInteger()),
        sa.Column("cost_usd", sa.Float()),
        sa.Column("wall_time_ms", sa.BigInteger()),
        sa.ForeignKeyConstraint(
            ["run_id", "attempt"],
            ["attempts.run_id", "attempts.attempt"],
            name="fk_dispatches_attempt",
        ),
        sa.UniqueConstraint("run_id", "attempt", "seat", name="uq_dispatches_seat"),
    )
    op.create_table(
        "stage_records",
        sa.Column("task_id", sa.String(NAME), sa.ForeignKey("tasks.id"), primary_key=True),
        sa.Column("stage", sa.String(TOKEN), primary_key=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_verdict", sa.String(TOKEN), nullable=False),
        sa.Column("last_finding_signatures", _json(), nullable=False),
        sa.CheckConstraint("attempts >= 0", name="ck_stage_records_attempts_nonnegative"),
    )
    op.create_table(
        "events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("at", _when(), nullable=False),
        sa.Column("task_id", sa.String(NAME), sa.ForeignKey("tasks.id")),
        sa.Column("run_id", sa.String(NAME), sa.ForeignKey("runs.id")),
        sa.Column("kind", sa.String(NAME), nullable=False),
        sa.Column("data", _json(), nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_events_task", "events", ["task_id", "id"])
    op.create_index("ix_events_run", "events", ["run_id"])
    _append_only_events()


def _append_only_events() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION assay_events_append_only() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'events are append-only'; END $$"
        )
        op.execute(
            "CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events "
            "FOR EACH ROW EXECUTE FUNCTION assay_events_append_only()"
        )
        return
    for action in ("UPDATE", "DELETE"):
        op.execute(
            f"CREATE TRIGGER events_no_{action.lower()} BEFORE {action} ON events "
            "BEGIN SELECT RAISE(ABORT, 'events are append-only'); END"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS events_append_only ON events")
        op.execute("DROP FUNCTION IF EXISTS assay_events_append_only()")
    for table in ("events", "stage_records", "dispatches", "attempts", "runs", "tasks"):
        op.drop_table(table)
