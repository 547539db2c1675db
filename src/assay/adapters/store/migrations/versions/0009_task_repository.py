"""Where a task was queued: ``tasks.repository`` (the id of the repository it belongs to) and
``tasks.branch`` (the branch it targets).

Workers on several machines share one ledger; each runs only its own repository's tasks, which
it picks with ``repository IS NULL OR repository = :mine``, oldest first: hence the index in
that order. Null for every existing task, which therefore any worker still runs, as before.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("tasks", sa.Column("repository", sa.String(1000), nullable=True))
    op.add_column("tasks", sa.Column("branch", sa.String(255), nullable=True))
    op.create_index("ix_tasks_repository_created", "tasks", ["repository", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_tasks_repository_created", "tasks")
    # In place (SQLite 3.35+ drops a column itself): a batch copy of ``tasks`` would trip the
    # foreign keys of every row that refers to a task.
    op.drop_column("tasks", "branch")
    op.drop_column("tasks", "repository")
