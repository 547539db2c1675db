"""One spelling per event kind: the store's old underscored kinds become dotted.

The store wrote ``task_added``, ``task_saved``, ``run_started`` and ``run_closed`` while the
engine wrote ``run.started`` and a bare ``warning``. Every reader now matches one closed
vocabulary (``assay.core.vocab.EventKind``), so old rows are rewritten here and an old ledger
reads the same as a new one. The store's ``run_started`` (the claim of a task, written by
``start_run``) is ``run.opened``: the graph's ``run.started`` is a different event (it carries
the base commit) and both occur in every run.

The events table refuses UPDATE by trigger (append-only); the triggers are lifted for this one
rewrite inside the migration's transaction, so no other writer can slip an update in, and put
back exactly as revision 0001 made them.

Revision ID: 0003
Revises: 0002
Create Date: 2026-01-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen here (never imported from the vocabulary): a migration must keep meaning what it did.
RENAMED = {
    "task_added": "task.added",
    "task_saved": "task.saved",
    "run_started": "run.opened",
    "run_closed": "run.closed",
    "warning": "run.warning",
}

_EVENTS = sa.table("events", sa.column("kind", sa.String()))


def upgrade() -> None:
    _rewrite(RENAMED)


def downgrade() -> None:
    _rewrite({new: old for old, new in RENAMED.items()})


def _rewrite(renames: dict[str, str]) -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        op.execute("ALTER TABLE events DISABLE TRIGGER events_append_only")
    else:
        op.execute("DROP TRIGGER events_no_update")
    kind = _EVENTS.c.kind
    op.execute(
        _EVENTS.update()
        .where(kind.in_(list(renames)))
        .values(kind=sa.case(renames, value=kind, else_=kind))
    )
    if postgres:
        op.execute("ALTER TABLE events ENABLE TRIGGER events_append_only")
    else:
        op.execute(
            "CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
            "BEGIN SELECT RAISE(ABORT, 'events are append-only'); END"
        )
