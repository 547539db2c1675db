"""A run's logs in the ledger: ``run_logs``, one row per log of the run folder (a coder's, a
check's, a judge's), bounded and redacted, so a run that ran on another machine can be read
from any machine that reads the ledger.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_logs",
        sa.Column("run_id", sa.String(200), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("name", sa.String(1000), primary_key=True),
        sa.Column("attempt", sa.Integer()),
        sa.Column("seat", sa.Integer()),
        sa.Column("role", sa.String(32), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("truncated", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("size >= 0", name="ck_run_logs_size"),
    )


def downgrade() -> None:
    op.drop_table("run_logs")
