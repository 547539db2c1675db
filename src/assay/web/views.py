"""What the dashboard's pages show, read from the ledger: pure data for templates.

Each function reads in one read transaction and returns a frozen value of
:mod:`assay.web.view_models` (re-exported here). A run's page is built from its event log while
it is open, so it works the same for local and Temporal runs; a closed run adds its attempt and
dispatch rows and the documents its close kept (``run_documents``), falling back to its payload
file for a run closed before the ledger kept them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from assay.adapters.store.run_logs import read_logs
from assay.adapters.store.schema import runs
from assay.adapters.store.sql import Ledger
from assay.web import view_halts, view_live, view_logs, view_queue, view_run
from assay.web.queue_query import QueueQuery
from assay.web.view_models import (
    UNREADABLE_STATUS,
    ActionView,
    AttemptState,
    AttemptView,
    FiredHaltRow,
    HaltsPage,
    HaltView,
    QueuePage,
    QueueRow,
    ReportFile,
    ReportMark,
    ReportView,
    RunBrief,
    RunView,
    SeatState,
    SeatView,
    TallyView,
    TaskView,
    Totals,
    ValidatorView,
)

__all__ = [
    "UNREADABLE_STATUS",
    "ActionView",
    "AttemptState",
    "AttemptView",
    "FiredHaltRow",
    "HaltView",
    "HaltsPage",
    "QueuePage",
    "QueueRow",
    "ReportFile",
    "ReportMark",
    "ReportView",
    "RunBrief",
    "RunView",
    "SeatState",
    "SeatView",
    "TallyView",
    "TaskView",
    "Totals",
    "ValidatorView",
    "halts_page",
    "payload_document",
    "queue_page",
    "run_view",
    "task_view",
]


def queue_page(
    ledger: Ledger,
    *,
    status: str | None = None,
    page: int = 1,
    per_page: int = 50,
    query: QueueQuery | None = None,
) -> QueuePage:
    """One page of the queue as ``query`` says (default: newest task first, of ``status``:
    ``unreadable`` is the rows that are not valid tasks). A page past the end shows the last."""
    query = query or QueueQuery(status=status, page=page)
    status, page = query.status, query.page
    with ledger.read() as conn:
        newest = view_queue.last_event_id(conn)
        counts = view_queue.status_counts(conn)
        where = view_queue.status_filter(status)
        if query.filtered:
            where = sa.and_(where, query.where(conn.dialect.name))
            return _searched(conn, query, where, counts, per_page, newest)
        if status == view_queue.NEEDS_YOU_STATUS:
            total = view_queue.needs_you(counts)
        else:
            total = counts["all"] if status is None else counts.get(status, 0)
        page, per_page, pages = view_queue.page_bounds(total, page, per_page)
        rows, _raw = view_queue.queue_rows(
            conn,
            where,
            order=query.order(),
            limit=per_page,
            offset=(page - 1) * per_page,
        )
    return QueuePage(
        rows=rows,
        counts=counts,
        status=status,
        page=page,
        per_page=per_page,
        total=total,
        pages=pages,
        last_event_id=newest,
        needs_you=view_queue.needs_you(counts),
    )


def _searched(
    conn: sa.Connection,
    query: QueueQuery,
    where: sa.ColumnElement[bool],
    counts: dict[str, int],
    per_page: int,
    newest: int,
) -> QueuePage:
    """A page of a searched or filtered queue: its ids and the count in one scan."""
    page, per_page, _pages = view_queue.page_bounds(counts["all"], query.page, per_page)
    order = query.order()
    ids, total = view_queue.counted_page(conn, where, order, per_page, (page - 1) * per_page)
    if total is None and page == 1:
        total = 0  # nothing matches
    if total is None:  # past the end: count, then show the last page
        total = view_queue.count_where(conn, where)
        page, per_page, _pages = view_queue.page_bounds(total, page, per_page)
        if total:
            ids, _ = view_queue.counted_page(conn, where, order, per_page, (page - 1) * per_page)
    page, per_page, pages = view_queue.page_bounds(total, page, per_page)
    rows, _raw = view_queue.rows_of(conn, ids)
    return QueuePage(
        rows=rows,
        counts=counts,
        status=query.status,
        page=page,
        per_page=per_page,
        total=total,
        pages=pages,
        last_event_id=newest,
        needs_you=view_queue.needs_you(counts),
    )


def needs_you(ledger: Ledger) -> int:
    """The held and failed tasks: the count the navigation shows on every page."""
    with ledger.read() as conn:
        return view_queue.count_needing_you(conn)


def task_view(ledger: Ledger, task_id: str) -> TaskView | None:
    """A task's page, or None for an unknown task."""
    with ledger.read() as conn:
        return view_queue.task_page(conn, task_id)


def run_view(ledger: Ledger, run_id: str, *, state_dir: Path | None) -> RunView | None:
    """A run's page, or None for an unknown run; ``state_dir``: this machine's halt state
    files (None: there are none here)."""
    with ledger.read() as conn:
        run = view_run.build_run_view(conn, run_id, state_dir)
        logs = read_logs(conn, run_id) if run is not None else []
        if run is not None and run.run.open:
            run = replace(run, attempts=view_live.with_live_seats(conn, run_id, run.attempts, logs))
    if run is None or not logs:
        return run
    return replace(run, attempts=view_logs.with_log_links(run.attempts, logs), logs=logs)


def halts_page(
    ledger: Ledger, *, state_dir: Path | None, page: int = 1, per_page: int = 50
) -> HaltsPage:
    """The halts still fired, newest firing first."""
    with ledger.read() as conn:
        newest = view_queue.last_event_id(conn)
        return view_halts.halts_page_of(conn, state_dir, page, per_page, newest)


def payload_document(ledger: Ledger, run_id: str) -> dict[str, Any] | None:
    """The run's payload document: the ledger's copy, else its payload file when readable
    here; None for an unknown or open run, or one whose payload is nowhere in sight."""
    with ledger.read() as conn:
        path = conn.execute(sa.select(runs.c.payload_path).where(runs.c.id == run_id)).first()
        if path is None:
            return None
        return view_run.payload_of(conn, run_id, path[0])
