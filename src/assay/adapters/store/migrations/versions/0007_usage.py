"""The usage journal: every increase of spending a program reported, as it arrived.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "usage",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("task_id", sa.String(200), sa.ForeignKey("tasks.id"), nullable=False),
        sa.Column("run_id", sa.String(200), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("dispatch", sa.String(200), nullable=False),
        sa.Column("attempt", sa.Integer()),
        sa.Column("seat", sa.Integer()),
        sa.Column("role", sa.String(32), nullable=False),
        sa.Column("source", sa.String(200), nullable=False),
        sa.Column("model", sa.String(200)),
        sa.Column("tokens_in", sa.BigInteger(), nullable=False),
        sa.Column("tokens_out", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Float()),
        sa.Column("priced", sa.Boolean(), nullable=False),
        sa.Column("reported", sa.Boolean(), nullable=False),
        sa.CheckConstraint("tokens_in >= 0 AND tokens_out >= 0", name="ck_usage_tokens"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_usage_task", "usage", ["task_id", "id"])
    op.create_index("ix_usage_run", "usage", ["run_id", "dispatch"])
    op.create_index("ix_usage_at", "usage", ["at"])


def downgrade() -> None:
    op.drop_index("ix_usage_at", "usage")
    op.drop_index("ix_usage_run", "usage")
    op.drop_index("ix_usage_task", "usage")
    op.drop_table("usage")
