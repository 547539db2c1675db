"""Each dispatch's usage summed on one row (``dispatch_totals``), kept up to date as each usage
row is journaled, so the usage page and ``assay usage`` read one row per dispatch rather than
folding the journal; filled here from the journal's rows; an index on when runs started, for
the usage page's runs per day.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIGINT_MAX = 2**63 - 1
# A dispatch's token counts summed, at most what its 64-bit column holds: SQLite's integer
# sum() fails past it (total() is a float, exact to 2**53), PostgreSQL's is a numeric.
_TOKENS = {
    "sqlite": "CAST(min(total({c}), 9223372036854775807.0) AS INTEGER)",
    "postgresql": "least(sum({c}), 9223372036854775807)",
}
# One row per dispatch, as the ledger writes it from now on: sums of its rows, its first and
# newest row's time and id, the newest row's ``priced``, the newest model named; its task,
# role, source, attempt and seat (the same in each of its rows) from its first row.
_BACKFILL = """
INSERT INTO dispatch_totals (run_id, dispatch, task_id, attempt, seat, role, source, model,
    tokens_in, tokens_out, cost_usd, reports, first_at, last_at, first_id, last_id, priced,
    reported)
SELECT g.run_id, g.dispatch, f.task_id, f.attempt, f.seat, f.role, f.source, m.model,
       g.tokens_in, g.tokens_out, g.cost_usd, g.reports, g.first_at, g.last_at, g.first_id,
       g.last_id, n.priced, CASE WHEN g.reported = 1 THEN TRUE ELSE FALSE END
FROM (SELECT run_id, dispatch, {tokens_in} AS tokens_in, {tokens_out} AS tokens_out,
             sum(cost_usd) AS cost_usd, count(*) AS reports, min(at) AS first_at,
             max(at) AS last_at, min(id) AS first_id, max(id) AS last_id,
             max(CASE WHEN model IS NOT NULL THEN id END) AS model_id,
             max(CASE WHEN reported THEN 1 ELSE 0 END) AS reported
      FROM usage GROUP BY run_id, dispatch) g
JOIN usage f ON f.id = g.first_id
JOIN usage n ON n.id = g.last_id
LEFT JOIN usage m ON m.id = g.model_id
"""


def backfill(conn: sa.Connection) -> None:
    """Sum the journal's rows into ``dispatch_totals`` (empty before): what this revision does
    to a ledger, and what a bench does after bulk-inserting usage rows."""
    sums = _TOKENS[conn.dialect.name]
    sql = _BACKFILL.format(
        tokens_in=sums.format(c="tokens_in"), tokens_out=sums.format(c="tokens_out")
    )
    conn.execute(sa.text(sql))


def upgrade() -> None:
    id_type = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "dispatch_totals",
        sa.Column("run_id", sa.String(200), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("dispatch", sa.String(200), primary_key=True),
        sa.Column("task_id", sa.String(200), sa.ForeignKey("tasks.id"), nullable=False),
        sa.Column("attempt", sa.Integer()),
        sa.Column("seat", sa.Integer()),
        sa.Column("role", sa.String(32), nullable=False),
        sa.Column("source", sa.String(200), nullable=False),
        sa.Column("model", sa.String(200)),
        sa.Column("tokens_in", sa.BigInteger(), nullable=False),
        sa.Column("tokens_out", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Float()),
        sa.Column("reports", sa.Integer(), nullable=False),
        sa.Column("first_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("first_id", id_type, nullable=False),
        sa.Column("last_id", id_type, nullable=False),
        sa.Column("priced", sa.Boolean(), nullable=False),
        sa.Column("reported", sa.Boolean(), nullable=False),
    )
    backfill(op.get_bind())
    op.create_index("ix_dispatch_totals_task", "dispatch_totals", ["task_id", "first_id"])
    covering = ["first_at", "role", "source", "run_id", "first_id", "tokens_in", "tokens_out"]
    covering += ["cost_usd", "priced", "reported"]
    op.create_index("ix_dispatch_totals_first_at", "dispatch_totals", covering)
    op.create_index("ix_dispatch_totals_last_at", "dispatch_totals", ["last_at"])
    op.create_index("ix_runs_started", "runs", ["started_at"])


def downgrade() -> None:
    op.drop_index("ix_runs_started", "runs")
    op.drop_table("dispatch_totals")
