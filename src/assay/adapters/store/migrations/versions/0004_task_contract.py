"""A task's dispatch contract kept with it: ``tasks.contract``.

Before this, a task's contract was a file beside the ledger (``.assay/tasks/<id>.contract.json``),
which a worker on another machine cannot read. Existing tasks keep NULL here and their file
stays the place their contract is read from; tasks queued from now on carry theirs.

Revision ID: 0004
Revises: 0003
Create Date: 2026-01-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    document = sa.JSON(none_as_null=True).with_variant(
        postgresql.JSONB(none_as_null=True), "postgresql"
    )
    op.add_column("tasks", sa.Column("contract", document, nullable=True))


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite 3.35+), not alembic's batch copy of the table: the copy
    # drops ``tasks``, which the foreign keys of runs and events refuse once it has rows.
    op.drop_column("tasks", "contract")
