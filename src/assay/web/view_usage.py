"""What a run's and a task's dispatches spent, summed from the usage journal for the pages.

The journal is written as programs report (a killed run still has it), so where it holds a
run's dispatches its sums are shown rather than what the seats' ``seat.finished`` events or
dispatch rows say; a run from before the journal keeps those. A cost is unknown as soon as one
dispatch's is: the page shows the known part as a lower bound and counts the others apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import sqlalchemy as sa

from assay.adapters.store.usage_log import DispatchUsage, dispatch_usage
from assay.core.usage import Spend, UsageFigures
from assay.core.vocab import UsageRole
from assay.web.view_models import AttemptView, Totals

SeatKey = tuple[int, int]  # (attempt, seat)


def run_usage(conn: sa.Connection, run_id: str) -> tuple[Spend | None, dict[SeatKey, UsageFigures]]:
    """The run's journaled spending (None: nothing journaled) and each coder seat's figures."""
    found = dispatch_usage(conn, run_id=run_id)
    seats = {
        (d.key.attempt, d.key.seat): d.figures
        for d in found
        if d.key.role is UsageRole.CODER and d.key.attempt is not None and d.key.seat is not None
    }
    return _spend(found), seats


def task_usage(conn: sa.Connection, task_id: str) -> tuple[Spend | None, dict[str, Spend]]:
    """The task's journaled spending in all (None: nothing journaled) and per run."""
    found = dispatch_usage(conn, task_id=task_id)
    per_run: dict[str, list[DispatchUsage]] = {}
    for dispatch in found:
        per_run.setdefault(dispatch.key.run_id, []).append(dispatch)
    runs = {run_id: Spend.of(d.figures for d in spent) for run_id, spent in per_run.items()}
    return _spend(found), runs


def with_seat_usage(
    attempts: Sequence[AttemptView], seats: dict[SeatKey, UsageFigures]
) -> list[AttemptView]:
    """The attempts with each journaled seat's tokens and cost (unknown where its program
    reported none) in place of what its events or rows said."""
    if not seats:
        return list(attempts)
    shown = []
    for attempt in attempts:
        changed = []
        for seat in attempt.seats:
            figures = seats.get((seat.attempt, seat.seat))
            if figures is not None:
                tokens = figures.tokens if figures.reported else None
                cost = figures.cost_usd if figures.priced else None
                seat = replace(seat, tokens=tokens, cost_usd=cost)  # noqa: PLW2901
            changed.append(seat)
        shown.append(replace(attempt, seats=changed))
    return shown


def totals(seats: Totals, usage: Spend | None) -> Totals:
    """The run's totals: the journal's tokens and cost where it has the run's dispatches."""
    if usage is None:
        return seats
    return replace(seats, tokens=usage.tokens, cost_usd=usage.cost_usd)


def _spend(found: list[DispatchUsage]) -> Spend | None:
    return Spend.of(d.figures for d in found) if found else None
