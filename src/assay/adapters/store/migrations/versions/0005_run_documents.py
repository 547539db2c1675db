"""A closed run's documents kept in the ledger: ``run_documents``.

The payload, the chosen candidate's diff and the halt states were files on the machine that ran
the run; a dashboard reading the ledger from another machine (Temporal workers elsewhere) could
not show them. Runs closed before this have no row; their payload file is still read.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _document(*, none_as_null: bool) -> sa.JSON:
    return sa.JSON(none_as_null=none_as_null).with_variant(
        postgresql.JSONB(none_as_null=none_as_null), "postgresql"
    )


def upgrade() -> None:
    op.create_table(
        "run_documents",
        sa.Column("run_id", sa.String(200), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("payload", _document(none_as_null=False), nullable=False),
        sa.Column("diff", sa.Text()),
        sa.Column("diff_truncated", sa.Boolean(), nullable=False),
        sa.Column("halt_states", _document(none_as_null=True)),
    )


def downgrade() -> None:
    op.drop_table("run_documents")
