"""The ledger's tables, as SQLAlchemy Core metadata.

This is the *current* shape, used to build queries and to check (in tests) that the alembic
migrations produce exactly it; the migrations themselves are frozen snapshots and never import
this module's tables.

Reading tasks never selects ``contract`` (a document per task, read only when a run needs
it). There is deliberately no attempts counter on ``tasks``: a task's spent attempts are its
``task`` row in ``stage_records``, the one place any counter lives (``sort_attempts`` is a copy
read back from there in the same transaction, only for the queue's sort).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect

NAME_LENGTH = 200
TOKEN_LENGTH = 32
REPOSITORY_LENGTH = 1000
BRANCH_LENGTH = 255
LOG_NAME_LENGTH = 1000


class UTCDateTime(sa.TypeDecorator[datetime]):
    """Aware datetimes in, aware UTC datetimes out, on every backend.

    SQLite has no time zones, so values are stored as naive UTC there; a naive datetime is
    refused on the way in rather than guessed at.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value!r}: the ledger stores aware times only")
        value = value.astimezone(UTC)
        return value if dialect.name == "postgresql" else value.replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def json_type(*, none_as_null: bool = False) -> sa.types.TypeEngine[Any]:
    """JSON on SQLite, JSONB on PostgreSQL; ``none_as_null``: Python's None is SQL NULL (not
    the JSON ``null``), for an optional column."""
    return sa.JSON(none_as_null=none_as_null).with_variant(
        postgresql.JSONB(none_as_null=none_as_null), "postgresql"
    )


def event_id_type() -> sa.types.TypeEngine[int]:
    """64-bit on PostgreSQL; on SQLite an INTEGER primary key is the rowid."""
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


metadata = sa.MetaData()

tasks = sa.Table(
    "tasks",
    metadata,
    sa.Column("id", sa.String(NAME_LENGTH), primary_key=True),
    sa.Column("title", sa.Text(), nullable=False),
    sa.Column("instruction", sa.Text(), nullable=False),
    sa.Column("status", sa.String(TOKEN_LENGTH), nullable=False),
    sa.Column("last_error", sa.Text()),
    sa.Column("hold_reason", sa.Text()),
    sa.Column("hold_source", sa.String(TOKEN_LENGTH)),
    sa.Column("diagnostic", sa.Text()),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    sa.Column("not_before", UTCDateTime()),
    # The dispatch contract the task was queued with, as set (defaults left out), so a worker
    # on any machine can run it; NULL for a task queued before contracts were kept here.
    sa.Column("contract", json_type(none_as_null=True)),
    # Where it was queued: the repository it belongs to (only that repository's workers run
    # it; NULL: any worker, as for a task queued before this was kept) and the branch it
    # targets.
    sa.Column("repository", sa.String(REPOSITORY_LENGTH)),
    sa.Column("branch", sa.String(BRANCH_LENGTH)),
    # What the queue filters and sorts by, kept here so a page over any number of tasks reads
    # one row per task (see ``task_totals``, which writes them in the transaction that changes
    # what they sum): the coders its contract names (``|kind=claude|model=opus|``); the known
    # cost its dispatches journaled and how many of them have an unknown cost (so the known
    # cost is then a lower bound, never a whole); the seconds its closed runs took; its spent
    # attempts (a copy of its ``task`` stage record's count, for the sort alone: read a task's
    # attempts from its stage record).
    sa.Column("coders", sa.Text()),
    sa.Column("cost_usd", sa.Float(), nullable=False, server_default="0"),
    sa.Column("cost_unknown", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("run_seconds", sa.Float(), nullable=False, server_default="0"),
    sa.Column("sort_attempts", sa.Integer(), nullable=False, server_default="0"),
)
# In the order tasks are listed (oldest first), all of them or those of one status.
sa.Index("ix_tasks_created", tasks.c.created_at, tasks.c.id)
sa.Index("ix_tasks_status_created", tasks.c.status, tasks.c.created_at, tasks.c.id)
# A worker's pick: its repository's tasks (and those of none), oldest first.
sa.Index("ix_tasks_repository_created", tasks.c.repository, tasks.c.created_at, tasks.c.id)
# The queue's sorts by cost and by time spent, walked in order for a page.
sa.Index("ix_tasks_cost", tasks.c.cost_usd, tasks.c.created_at, tasks.c.id)
sa.Index("ix_tasks_run_seconds", tasks.c.run_seconds, tasks.c.created_at, tasks.c.id)
sa.Index("ix_tasks_sort_attempts", tasks.c.sort_attempts, tasks.c.created_at, tasks.c.id)
sa.Index("ix_tasks_updated", tasks.c.updated_at, tasks.c.created_at, tasks.c.id)
# The coder filter (a LIKE no index can seek) reads this narrow index instead of every row,
# with what its status filter and sorts need beside it.
sa.Index(
    "ix_tasks_coders",
    tasks.c.coders,
    tasks.c.created_at,
    tasks.c.id,
    tasks.c.status,
    tasks.c.updated_at,
    tasks.c.cost_usd,
    tasks.c.run_seconds,
    tasks.c.sort_attempts,
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.String(NAME_LENGTH), primary_key=True),
    sa.Column("task_id", sa.String(NAME_LENGTH), sa.ForeignKey("tasks.id"), nullable=False),
    sa.Column("dispatch_id", sa.String(NAME_LENGTH)),
    sa.Column("status", sa.String(TOKEN_LENGTH), nullable=False),
    sa.Column("settle_row", sa.String(TOKEN_LENGTH)),
    sa.Column("attempt_spent", sa.Boolean()),
    sa.Column("task_status", sa.String(TOKEN_LENGTH)),
    sa.Column("reason", sa.Text()),
    sa.Column("payload_path", sa.Text()),
    sa.Column("started_at", UTCDateTime(), nullable=False),
    sa.Column("finished_at", UTCDateTime()),
)
sa.Index("ix_runs_task_started", runs.c.task_id, runs.c.started_at)
# The usage page's runs started per day.
sa.Index("ix_runs_started", runs.c.started_at)

attempts = sa.Table(
    "attempts",
    metadata,
    sa.Column("run_id", sa.String(NAME_LENGTH), sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("attempt", sa.Integer(), primary_key=True),
    sa.Column("outcome", sa.String(TOKEN_LENGTH), nullable=False),
    sa.Column("failures", json_type(), nullable=False),
    sa.Column("finding_signatures", json_type(), nullable=False),
    sa.CheckConstraint("attempt >= 1", name="ck_attempts_attempt_positive"),
)

dispatches = sa.Table(
    "dispatches",
    metadata,
    sa.Column("id", sa.String(NAME_LENGTH), primary_key=True),
    sa.Column("run_id", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("attempt", sa.Integer(), nullable=False),
    sa.Column("seat", sa.Integer(), nullable=False),
    sa.Column("coder", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("label", sa.String(TOKEN_LENGTH)),
    sa.Column("viable", sa.Boolean(), nullable=False),
    sa.Column("lost_to_quota", sa.Boolean(), nullable=False),
    sa.Column("stop_reason", sa.String(TOKEN_LENGTH)),
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

stage_records = sa.Table(
    "stage_records",
    metadata,
    sa.Column("task_id", sa.String(NAME_LENGTH), sa.ForeignKey("tasks.id"), primary_key=True),
    sa.Column("stage", sa.String(TOKEN_LENGTH), primary_key=True),
    sa.Column("attempts", sa.Integer(), nullable=False),
    sa.Column("last_verdict", sa.String(TOKEN_LENGTH), nullable=False),
    sa.Column("last_finding_signatures", json_type(), nullable=False),
    sa.CheckConstraint("attempts >= 0", name="ck_stage_records_attempts_nonnegative"),
)

# What a dashboard on any machine shows of a closed run without the files of the worker that ran
# it: the payload document, the chosen candidate's diff (capped), the dispatch's halt states.
run_documents = sa.Table(
    "run_documents",
    metadata,
    sa.Column("run_id", sa.String(NAME_LENGTH), sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("payload", json_type(), nullable=False),
    sa.Column("diff", sa.Text()),
    sa.Column("diff_truncated", sa.Boolean(), nullable=False),
    sa.Column("halt_states", json_type(none_as_null=True)),
)

events = sa.Table(
    "events",
    metadata,
    sa.Column("id", event_id_type(), primary_key=True, autoincrement=True),
    sa.Column("at", UTCDateTime(), nullable=False),
    sa.Column("task_id", sa.String(NAME_LENGTH), sa.ForeignKey("tasks.id")),
    sa.Column("run_id", sa.String(NAME_LENGTH), sa.ForeignKey("runs.id")),
    sa.Column("kind", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("data", json_type(), nullable=False),
    sqlite_autoincrement=True,
)
sa.Index("ix_events_task", events.c.task_id, events.c.id)
sa.Index("ix_events_run", events.c.run_id)

# Every increase of spending a program reported, journaled the moment it arrived (a killed run
# still accounts for what it spent). A dispatch (``dispatch``: ``a1.s2``, ``a1.judges.j1``, …)
# spent the sum of its rows (``cost_usd``: the known cost a row adds); ``priced`` is whether its
# whole cost was known as of that row (its last row says), ``reported`` False marks a dispatch
# whose program reported no usage at all.
usage = sa.Table(
    "usage",
    metadata,
    sa.Column("id", event_id_type(), primary_key=True, autoincrement=True),
    sa.Column("at", UTCDateTime(), nullable=False),
    sa.Column("task_id", sa.String(NAME_LENGTH), sa.ForeignKey("tasks.id"), nullable=False),
    sa.Column("run_id", sa.String(NAME_LENGTH), sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("dispatch", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("attempt", sa.Integer()),
    sa.Column("seat", sa.Integer()),
    sa.Column("role", sa.String(TOKEN_LENGTH), nullable=False),
    sa.Column("source", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("model", sa.String(NAME_LENGTH)),
    sa.Column("tokens_in", sa.BigInteger(), nullable=False),
    sa.Column("tokens_out", sa.BigInteger(), nullable=False),
    sa.Column("cost_usd", sa.Float()),
    sa.Column("priced", sa.Boolean(), nullable=False),
    sa.Column("reported", sa.Boolean(), nullable=False),
    sa.CheckConstraint("tokens_in >= 0 AND tokens_out >= 0", name="ck_usage_tokens"),
    sqlite_autoincrement=True,
)
sa.Index("ix_usage_task", usage.c.task_id, usage.c.id)
sa.Index("ix_usage_run", usage.c.run_id, usage.c.dispatch)
sa.Index("ix_usage_at", usage.c.at)

# Each dispatch's journal summed (see ``dispatch_totals``, which writes its row in the
# transaction that journals each of its usage rows): what its rows add up to, how many there
# are, when the first and newest came (``first_id``/``last_id`` order them), whether the newest
# was priced (its whole cost known) and whether any reported usage at all; ``cost_usd`` NULL
# when no row came with a cost; ``model`` the newest one named.
dispatch_totals = sa.Table(
    "dispatch_totals",
    metadata,
    sa.Column("run_id", sa.String(NAME_LENGTH), sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("dispatch", sa.String(NAME_LENGTH), primary_key=True),
    sa.Column("task_id", sa.String(NAME_LENGTH), sa.ForeignKey("tasks.id"), nullable=False),
    sa.Column("attempt", sa.Integer()),
    sa.Column("seat", sa.Integer()),
    sa.Column("role", sa.String(TOKEN_LENGTH), nullable=False),
    sa.Column("source", sa.String(NAME_LENGTH), nullable=False),
    sa.Column("model", sa.String(NAME_LENGTH)),
    sa.Column("tokens_in", sa.BigInteger(), nullable=False),
    sa.Column("tokens_out", sa.BigInteger(), nullable=False),
    sa.Column("cost_usd", sa.Float()),
    sa.Column("reports", sa.Integer(), nullable=False),
    sa.Column("first_at", UTCDateTime(), nullable=False),
    sa.Column("last_at", UTCDateTime(), nullable=False),
    sa.Column("first_id", event_id_type(), nullable=False),
    sa.Column("last_id", event_id_type(), nullable=False),
    sa.Column("priced", sa.Boolean(), nullable=False),
    sa.Column("reported", sa.Boolean(), nullable=False),
)
sa.Index("ix_dispatch_totals_task", dispatch_totals.c.task_id, dispatch_totals.c.first_id)
# The usage page's and ``assay usage``'s range (dispatches by when they first reported), with
# what they sum beside it so the range is read from the index alone.
sa.Index(
    "ix_dispatch_totals_first_at",
    dispatch_totals.c.first_at,
    dispatch_totals.c.role,
    dispatch_totals.c.source,
    dispatch_totals.c.run_id,
    dispatch_totals.c.first_id,
    dispatch_totals.c.tokens_in,
    dispatch_totals.c.tokens_out,
    dispatch_totals.c.cost_usd,
    dispatch_totals.c.priced,
    dispatch_totals.c.reported,
)
sa.Index("ix_dispatch_totals_last_at", dispatch_totals.c.last_at)

# The tasks a transaction is deleting, while it does (empty otherwise): the events table's
# trigger lets an event be deleted only when its task, or its run's task, is listed here
# (revision 0008; see ``deletes``). The log stays append-only for every task that exists.
deleting_tasks = sa.Table(
    "deleting_tasks",
    metadata,
    sa.Column("task_id", sa.String(NAME_LENGTH), primary_key=True),
)

# A run's logs (a coder's, a check's, a judge's: ``name`` is the file's path in the run
# folder), each bounded and redacted (see :mod:`assay.core.run_logs`), so a run that ran on
# another machine can be read from this one. ``seat`` is NULL for a judge's and the run's own.
run_logs = sa.Table(
    "run_logs",
    metadata,
    sa.Column("run_id", sa.String(NAME_LENGTH), sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("name", sa.String(LOG_NAME_LENGTH), primary_key=True),
    sa.Column("attempt", sa.Integer()),
    sa.Column("seat", sa.Integer()),
    sa.Column("role", sa.String(TOKEN_LENGTH), nullable=False),
    sa.Column("size", sa.BigInteger(), nullable=False),
    sa.Column("text", sa.Text(), nullable=False),
    sa.Column("truncated", sa.Boolean(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    sa.CheckConstraint("size >= 0", name="ck_run_logs_size"),
)
