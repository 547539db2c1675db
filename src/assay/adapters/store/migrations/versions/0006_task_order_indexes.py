"""Indexes in the order tasks are listed: ``(created_at, id)`` and ``(status, created_at, id)``.

``assay task list`` and a worker's pick read tasks oldest first (``ORDER BY created_at, id``),
all of them or those of one status. Without an index in that order SQLite sorts every row on
each call (a third of ``task list``'s query time over 10,000 tasks); the status index gains
the order columns so one status is read in order too.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_tasks_created", "tasks", ["created_at", "id"])
    op.drop_index("ix_tasks_status", "tasks")
    op.create_index("ix_tasks_status_created", "tasks", ["status", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_tasks_status_created", "tasks")
    op.create_index("ix_tasks_status", "tasks", ["status"])
    op.drop_index("ix_tasks_created", "tasks")
