"""Events go only with their task: ``assay task delete|prune``.

The events table refuses UPDATE and DELETE by trigger (revision 0001). A deleted task takes
its events with it, so DELETE is now let through for exactly those: the deleting transaction
writes the tasks' ids into ``deleting_tasks`` first (and removes them before it commits), and
the trigger lets an event go only when its task — or its run's task — is listed there. UPDATE
stays refused, and so does any other DELETE: the log is still append-only for every task that
exists.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen here: a migration keeps meaning what it did.
_BEING_DELETED = (
    "EXISTS (SELECT 1 FROM deleting_tasks AS d WHERE d.task_id = OLD.task_id"
    " OR d.task_id = (SELECT r.task_id FROM runs AS r WHERE r.id = OLD.run_id))"
)
_REFUSE = "SELECT RAISE(ABORT, 'events are append-only')"


def upgrade() -> None:
    op.create_table("deleting_tasks", sa.Column("task_id", sa.String(200), primary_key=True))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE OR REPLACE FUNCTION assay_events_append_only() RETURNS trigger"
            " LANGUAGE plpgsql AS $$ BEGIN"
            f" IF TG_OP = 'DELETE' AND {_BEING_DELETED} THEN RETURN OLD; END IF;"
            " RAISE EXCEPTION 'events are append-only'; END $$"
        )
        return
    op.execute("DROP TRIGGER events_no_delete")
    op.execute(
        "CREATE TRIGGER events_no_delete BEFORE DELETE ON events"
        f" WHEN NOT {_BEING_DELETED} BEGIN {_REFUSE}; END"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE OR REPLACE FUNCTION assay_events_append_only() RETURNS trigger"
            " LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'events are append-only'; END $$"
        )
    else:
        op.execute("DROP TRIGGER events_no_delete")
        op.execute(f"CREATE TRIGGER events_no_delete BEFORE DELETE ON events BEGIN {_REFUSE}; END")
    op.drop_table("deleting_tasks")
