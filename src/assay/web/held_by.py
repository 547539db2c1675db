"""Who holds a held task, as the ledger recorded it: the queue's ``held_by`` filter and the
label its held rows show, one SQL expression for both.

- ``operator``: a person held it (``assay task hold|stop``, the dashboard); ``operator:NAME``:
  the newest hold (or cancel, or stop request) of the task was NAME's (its event's ``by``).
- ``halt``: the run that held it halted (a halt a coder's run fired).
- ``budget``: the run that held it spent the task's attempts or its refunds in a row
  (``budgets.max_attempts``, ``budgets.max_refunds``).
- ``gate``: the run that held it handed off to a human: a pull request, a landing the
  repository refused, a claim that nothing needed changing.
- ``unrunnable``: this machine cannot run its settings (found by the run, or before one).
- ``machine``: any of the last four.

"The run that held it" is the run whose ``run.closed`` is the task's newest ``run.closed`` or
``task.saved`` event; a machine hold with a ``task.saved`` newest was written outside a run,
which only the admission of an unrunnable task does.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import sqlalchemy as sa

from assay.adapters.store.schema import events, runs, tasks
from assay.core.vocab import EventKind, HoldSource, SettleRow, TaskStatus

OPERATOR_PREFIX = "operator:"
MAX_NAME = 200


class HeldBy(StrEnum):
    OPERATOR = "operator"
    HALT = "halt"
    BUDGET = "budget"
    GATE = "gate"
    UNRUNNABLE = "unrunnable"
    MACHINE = "machine"

    @classmethod
    def parse(cls, value: str, bad: type[ValueError]) -> str:
        """A filter's value as given (``operator:alice`` keeps its name); ``bad`` for one that
        names none of these."""
        value = value.strip()
        if not value or value in cls.__members__.values():
            return value
        if value.startswith(OPERATOR_PREFIX) and value[len(OPERATOR_PREFIX) :].strip():
            return OPERATOR_PREFIX + value[len(OPERATOR_PREFIX) :].strip()[:MAX_NAME]
        raise bad(f"held_by is one of {', '.join(cls)} or operator:NAME, not {value[:MAX_NAME]!r}.")


_ROWS: dict[HeldBy, tuple[SettleRow, ...]] = {
    HeldBy.HALT: (SettleRow.HALTED,),
    HeldBy.BUDGET: (
        SettleRow.STALLED_OR_FAILED,
        SettleRow.BLOCKED,
        SettleRow.NON_TERMINAL,
        SettleRow.PARKED,
        SettleRow.STALLED_QUOTA,
        SettleRow.FAILED_QUOTA_NO_VIABLE,
        SettleRow.FAILED_MACHINE_FAULT,
    ),
    HeldBy.GATE: (SettleRow.BLOCKED_WITH_PR, SettleRow.LAND_REFUSED, SettleRow.VERIFIED_NOOP),
}
_DECIDING = (EventKind.RUN_CLOSED.value, EventKind.TASK_SAVED.value)
_OPERATOR_MOVES = ("hold", "cancel")


def _json_text(column: Any, key: str, dialect: str) -> sa.ColumnElement[str]:
    if dialect == "postgresql":
        return column.op("->>")(key)  # type: ignore[no-any-return]
    return sa.func.json_extract(column, f"$.{key}")


def closing_row() -> sa.ColumnElement[str]:
    """The settle row of the run whose close last decided the task (NULL: a save did)."""
    closing_run = (
        sa.select(sa.case((events.c.kind == EventKind.RUN_CLOSED.value, events.c.run_id)))
        .where(events.c.task_id == tasks.c.id, events.c.kind.in_(_DECIDING))
        .order_by(events.c.id.desc())
        .limit(1)
        .correlate(tasks)
        .scalar_subquery()
    )
    return sa.select(runs.c.settle_row).where(runs.c.id == closing_run).scalar_subquery()


def operator_name(dialect: str) -> sa.ColumnElement[str]:
    """Who made the task's newest hold, cancel or stop request (NULL: none recorded)."""
    saved_move = sa.and_(
        events.c.kind == EventKind.TASK_SAVED.value,
        _json_text(events.c.data, "action", dialect).in_(_OPERATOR_MOVES),
    )
    moves = sa.or_(saved_move, events.c.kind == EventKind.TASK_STOP_REQUESTED.value)
    return (
        sa.select(_json_text(events.c.data, "by", dialect))
        .where(events.c.task_id == tasks.c.id, moves)
        .order_by(events.c.id.desc())
        .limit(1)
        .correlate(tasks)
        .scalar_subquery()
    )


def label(
    status: str, hold_source: str | None, closing: str | None, operator: str | None
) -> str | None:
    """What a row shows (the value that filters it): ``operator:NAME`` (``operator`` when no
    name was recorded) or the machine kind, from :func:`closing_row` and
    :func:`operator_name`; None for a task that is not held."""
    if status != TaskStatus.HELD.value:
        return None
    if hold_source == HoldSource.MANUAL.value:
        return OPERATOR_PREFIX + operator if operator else HeldBy.OPERATOR.value
    if hold_source != HoldSource.MACHINE.value:
        return None
    for kind, rows in _ROWS.items():
        if closing in rows:
            return kind.value
    return HeldBy.UNRUNNABLE.value


def held_by_filter(value: str, dialect: str) -> sa.ColumnElement[bool]:
    """The held tasks ``value`` names (see the module's doc), as :func:`label` tells them."""
    held = tasks.c.status == TaskStatus.HELD.value
    manual = sa.and_(held, tasks.c.hold_source == HoldSource.MANUAL.value)
    machine = sa.and_(held, tasks.c.hold_source == HoldSource.MACHINE.value)
    if value == HeldBy.OPERATOR:
        return manual
    if value.startswith(OPERATOR_PREFIX):
        return sa.and_(manual, operator_name(dialect) == value[len(OPERATOR_PREFIX) :])
    if value == HeldBy.MACHINE:
        return machine
    closing = closing_row()
    for kind, rows in _ROWS.items():
        if value == kind:
            return sa.and_(machine, closing.in_([r.value for r in rows]))
    others = [r.value for rows in _ROWS.values() for r in rows]
    return sa.and_(machine, sa.or_(closing.is_(None), closing.not_in(others)))
