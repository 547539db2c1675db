"""The queue and a task's page, read in one transaction each.

Only the page's rows are read in full: their contracts (for the budgets), their runs (the
last one, and the refund streak) and their operator events, each in one query over the page's
ids, so a queue of any length costs the same per page.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

import sqlalchemy as sa
from pydantic import ValidationError

from assay.adapters.store import statements as st
from assay.adapters.store.schema import events, runs, stage_records, tasks
from assay.core.contract import Budgets
from assay.core.settle import RefundStreak
from assay.core.tasks import Task
from assay.core.vocab import EventKind, SettleRow, TaskStatus
from assay.web import held_by, view_usage
from assay.web.view_models import UNREADABLE_STATUS, ActionView, QueueRow, RunBrief, TaskView

MAX_PER_PAGE = 500
_KNOWN_STATUSES = frozenset(s.value for s in TaskStatus)
_TASK_STAGE = sa.and_(stage_records.c.task_id == tasks.c.id, stage_records.c.stage == "task")


@cache
def _row_query(dialect: str) -> sa.Select[Any]:
    """A queue row's columns: the task's, its spent attempts, its stored totals and who holds
    it (what :func:`assay.web.held_by.label` reads)."""
    return sa.select(
        *st.TASK_COLUMNS,
        sa.func.coalesce(stage_records.c.attempts, 0).label("attempts"),
        tasks.c.cost_usd,
        tasks.c.cost_unknown,
        tasks.c.run_seconds,
        held_by.closing_row().label("closing_row"),
        held_by.operator_name(dialect).label("held_operator"),
    ).select_from(tasks.outerjoin(stage_records, _TASK_STAGE))


_STREAK_KINDS = (EventKind.TASK_SAVED.value, EventKind.RUN_OPENED.value)


def last_event_id(conn: sa.Connection) -> int:
    """The newest event's id (0 for an empty log). Read first, so what a page shows is at
    least this new and a live page asking for later events misses nothing."""
    return int(conn.execute(sa.select(sa.func.coalesce(sa.func.max(events.c.id), 0))).scalar_one())


def status_counts(conn: sa.Connection) -> dict[str, int]:
    """Tasks per stored status (a status this version does not know counts as unreadable)
    and ``all``."""
    counts: dict[str, int] = {}
    query = sa.select(tasks.c.status, sa.func.count()).group_by(tasks.c.status)
    for status, n in conn.execute(query):
        key = status if status in _KNOWN_STATUSES else UNREADABLE_STATUS
        counts[key] = counts.get(key, 0) + int(n)
    counts["all"] = sum(counts.values())
    return counts


NEEDS_YOU = (TaskStatus.HELD.value, TaskStatus.FAILED.value)
NEEDS_YOU_STATUS = "needs-you"
"""The queue's filter for what waits for an operator: held and failed tasks."""


def needs_you(counts: dict[str, int]) -> int:
    """The tasks that wait for an operator: held and failed."""
    return sum(counts.get(status, 0) for status in NEEDS_YOU)


def count_needing_you(conn: sa.Connection) -> int:
    query = sa.select(sa.func.count()).select_from(tasks).where(tasks.c.status.in_(NEEDS_YOU))
    return int(conn.execute(query).scalar_one())


def count_where(conn: sa.Connection, where: sa.ColumnElement[bool]) -> int:
    return int(
        conn.execute(sa.select(sa.func.count()).select_from(tasks).where(where)).scalar_one()
    )


def status_filter(status: str | None) -> sa.ColumnElement[bool]:
    if status is None:
        return sa.true()
    if status == NEEDS_YOU_STATUS:
        return tasks.c.status.in_(NEEDS_YOU)
    if status == UNREADABLE_STATUS:
        return tasks.c.status.not_in(sorted(_KNOWN_STATUSES))
    return tasks.c.status == status


def page_bounds(total: int, page: int, per_page: int) -> tuple[int, int, int]:
    """(page, per_page, pages), with page and per_page brought into range."""
    per_page = max(1, min(per_page, MAX_PER_PAGE))
    pages = max(1, math.ceil(total / per_page))
    return max(1, min(page, pages)), per_page, pages


NEWEST_FIRST = (tasks.c.created_at.desc(), tasks.c.id.desc())


def queue_rows(
    conn: sa.Connection,
    where: sa.ColumnElement[bool],
    *,
    order: Sequence[sa.ColumnElement[Any]] = NEWEST_FIRST,
    by_attempts: bool = False,
    limit: int | None = None,
    offset: int = 0,
) -> tuple[list[QueueRow], dict[str, Any]]:
    """The queue rows matching ``where`` in ``order`` (newest task first), and the raw rows by
    id; ``by_attempts``: ``order`` reads the spent attempts (the task stage's row is joined)."""
    # The page's ids from the tasks table alone (sorting a narrow row), then their full rows.
    chosen = _ids_query(where, order, by_attempts)
    if limit is not None:
        chosen = chosen.limit(limit).offset(offset)
    return rows_of(conn, list(conn.execute(chosen).scalars()))


def _ids_query(
    where: sa.ColumnElement[bool], order: Sequence[sa.ColumnElement[Any]], by_attempts: bool
) -> sa.Select[Any]:
    source = tasks.outerjoin(stage_records, _TASK_STAGE) if by_attempts else tasks
    return sa.select(tasks.c.id).select_from(source).where(where).order_by(*order)


def counted_page(
    conn: sa.Connection,
    where: sa.ColumnElement[bool],
    order: Sequence[sa.ColumnElement[Any]],
    by_attempts: bool,
    limit: int,
    offset: int,
) -> tuple[list[str], int | None]:
    """One page's ids of a searched queue and how many tasks match, read in one scan (a
    search reads every row once; counting apart would read them twice). None: the page is
    past the end, so the count is not known."""
    query = _ids_query(where, order, by_attempts).add_columns(sa.func.count().over())
    found = conn.execute(query.limit(limit).offset(offset)).all()
    return [row[0] for row in found], (int(found[0][1]) if found else None)


def rows_of(conn: sa.Connection, ids: list[str]) -> tuple[list[QueueRow], dict[str, Any]]:
    """The queue rows of ``ids``, in that order, and the raw rows by id."""
    if not ids:
        return [], {}
    place = {task_id: at for at, task_id in enumerate(ids)}
    raw = sorted(
        conn.execute(_row_query(conn.dialect.name).where(tasks.c.id.in_(ids))).all(),
        key=lambda r: place[r.id],
    )
    budgets = _budgets(conn, ids)
    histories = _histories(conn, ids)
    streaks = _refund_streaks(conn, ids, histories)
    rows = []
    for r in raw:
        history = histories.get(str(r.id), [])
        rows.append(
            _row(r, budgets.get(str(r.id)), streaks.get(str(r.id), 0), history[-1:] or None)
        )
    return rows, {str(r.id): r for r in raw}


def _row(
    raw: Any, budgets: Budgets | None, streak: int, last: Sequence[RunBrief] | None
) -> QueueRow:
    problem = None
    try:
        task = Task.model_validate({**raw._asdict(), "run_ids": []})
        status: str = task.status.value
    except ValidationError as exc:
        problem = st.row_problem(exc)
        status = UNREADABLE_STATUS
    spent = int(raw.attempts)
    max_attempts = budgets.max_attempts if budgets else None
    return QueueRow(
        task_id=str(raw.id),
        title=str(raw.title),
        status=status,
        problem=problem,
        attempts_spent=spent,
        max_attempts=max_attempts,
        attempts_remaining=None if max_attempts is None else max(0, max_attempts - spent),
        refund_streak=streak,
        max_refunds=budgets.max_refunds if budgets else None,
        hold_reason=raw.hold_reason,
        hold_source=raw.hold_source,
        not_before=raw.not_before,
        updated_at=raw.updated_at,
        last_run=last[0] if last else None,
        last_error=raw.last_error,
        created_at=raw.created_at,
        held_by=held_by.label(raw.status, raw.hold_source, raw.closing_row, raw.held_operator),
        cost_usd=float(raw.cost_usd),
        cost_unknown=int(raw.cost_unknown),
        run_seconds=float(raw.run_seconds),
    )


def _budgets(conn: sa.Connection, ids: list[str]) -> dict[str, Budgets | None]:
    """Each task's budgets from its stored contract (defaults where it sets none); None when
    the contract is absent (queued before contracts were kept) or unreadable."""
    if not ids:
        return {}
    query = sa.select(tasks.c.id, sa.type_coerce(tasks.c.contract, sa.Text)).where(
        tasks.c.id.in_(ids)
    )
    found: dict[str, Budgets | None] = {}
    for task_id, stored in conn.execute(query):
        document = st.stored_json(stored)
        value = document.get("budgets", {}) if isinstance(document, dict) else None
        try:
            found[task_id] = Budgets.model_validate(value) if isinstance(value, dict) else None
        except ValidationError:
            found[task_id] = None
    return found


def run_brief(row: Any) -> RunBrief:
    return RunBrief(
        run_id=str(row.id),
        task_id=str(row.task_id),
        status=str(row.status),
        open=row.finished_at is None,
        started_at=row.started_at,
        finished_at=row.finished_at,
        settle_row=row.settle_row,
        attempt_spent=row.attempt_spent,
        task_status=row.task_status,
        reason=row.reason,
    )


def _histories(conn: sa.Connection, ids: list[str]) -> dict[str, list[RunBrief]]:
    """Each task's runs, oldest first."""
    found: dict[str, list[RunBrief]] = {}
    if not ids:
        return found
    query = sa.select(runs).where(runs.c.task_id.in_(ids)).order_by(*st.RUN_ORDER)
    for row in conn.execute(query):
        found.setdefault(str(row.task_id), []).append(run_brief(row))
    return found


def _refund_streaks(
    conn: sa.Connection, ids: list[str], histories: dict[str, list[RunBrief]]
) -> dict[str, int]:
    """The refunded runs in a row since each task's last release, counted as
    :func:`assay.engine.recovery.refunds.refund_streak` counts them (its runs in the order their
    ``run.opened`` events were appended, a release starting over)."""
    if not ids:
        return {}
    query = (
        sa.select(events.c.task_id, events.c.run_id, events.c.kind, events.c.data)
        .where(events.c.task_id.in_(ids), events.c.kind.in_(_STREAK_KINDS))
        .order_by(events.c.id)
    )
    since: dict[str, list[str]] = {}
    for task_id, run_id, kind, data in conn.execute(query):
        if kind == EventKind.TASK_SAVED.value:
            if isinstance(data, dict) and data.get("status") == TaskStatus.QUEUED.value:
                since[task_id] = []
        elif run_id:
            since.setdefault(task_id, []).append(run_id)
    streaks = {}
    for task_id, run_ids in since.items():
        by_id = {r.run_id: r for r in histories.get(task_id, [])}
        closed = [by_id[i] for i in run_ids if i in by_id and not by_id[i].open]
        streaks[task_id] = RefundStreak.of((_settle_row(r.settle_row), r.reason) for r in closed)
    return {task_id: s.count for task_id, s in streaks.items()}


def _settle_row(value: str | None) -> SettleRow | None:
    try:
        return SettleRow(value) if value is not None else None
    except ValueError:
        return None


def actions_of(data_rows: Iterable[Any]) -> list[ActionView]:
    """Operator moves (``task.saved`` with an action), stop requests and halt re-arms, oldest
    first."""
    found = []
    for row in data_rows:
        data = row.data if isinstance(row.data, dict) else {}
        if row.kind == EventKind.TASK_SAVED.value:
            if not data.get("action"):
                continue  # a plain save (a machine's, or an older assay's move)
            action, reason = str(data["action"]), data.get("reason")
        elif row.kind == EventKind.TASK_STOP_REQUESTED.value:  # its hold follows at the close
            action, reason = f"stop ({data.get('action') or 'hold'})", data.get("reason")
        else:
            condition = data.get("condition")
            action, reason = f"rearm {condition}" if condition else "rearm", data.get("evidence")
        found.append(
            ActionView(
                at=row.at,
                action=action,
                by=str(data.get("by") or "unknown"),
                via=str(data.get("via") or "unknown"),
                reason=str(reason) if reason else None,
                run_id=row.run_id,
            )
        )
    return found


def task_page(conn: sa.Connection, task_id: str) -> TaskView | None:
    newest = last_event_id(conn)
    rows, raw = queue_rows(conn, tasks.c.id == task_id)
    if not rows:
        return None
    found = raw[task_id]
    history = _histories(conn, [task_id]).get(task_id, [])
    kinds = (
        EventKind.TASK_SAVED.value,
        EventKind.TASK_STOP_REQUESTED.value,
        EventKind.HALT_REARMED.value,
    )
    moves = conn.execute(
        sa.select(events.c.at, events.c.kind, events.c.data, events.c.run_id)
        .where(events.c.task_id == task_id, events.c.kind.in_(kinds))
        .order_by(events.c.id)
    )
    usage, run_usage = view_usage.task_usage(conn, task_id)
    return TaskView(
        row=rows[0],
        instruction=str(found.instruction),
        last_error=found.last_error,
        diagnostic=found.diagnostic,
        runs=list(reversed(history)),
        actions=actions_of(moves),
        usage=usage,
        run_usage=run_usage,
        last_event_id=newest,
    )
