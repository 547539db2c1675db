"""What a running seat's coder did so far, for its row on the run page.

Read from what the ledger holds while the seat runs: the usage journal (a row the moment its
program reports, :mod:`assay.adapters.store.usage_log`) for its turns, tokens and cost, and
the live copy of its log (:mod:`assay.adapters.live_logs`, shipped every few seconds) for its
last lines. A figure nobody reported stays unknown (None), never 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import sqlalchemy as sa

from assay.adapters.store.run_logs import LogEntry, read_log
from assay.adapters.store.schema import usage
from assay.core.vocab import UsageRole
from assay.web.view_logs import coder_log
from assay.web.view_models import AttemptView, LiveSeat, SeatState, SeatView

TAIL_LINES = 8
TAIL_LINE_CHARS = 400  # of one line: a model's stream-json line can be a whole file


def report_counts(conn: sa.Connection, run_id: str) -> dict[tuple[int, int], int]:
    """How many usage reports each coder seat of the run journaled, by (attempt, seat)."""
    query = (
        sa.select(usage.c.attempt, usage.c.seat, sa.func.count())
        .where(usage.c.run_id == run_id, usage.c.role == UsageRole.CODER.value)
        .group_by(usage.c.attempt, usage.c.seat)
    )
    return {
        (int(a), int(s)): int(n)
        for a, s, n in conn.execute(query)
        if a is not None and s is not None
    }


def last_lines(text: str, count: int = TAIL_LINES, width: int = TAIL_LINE_CHARS) -> str:
    """The last ``count`` lines of ``text`` that hold anything, each cut to ``width``."""
    lines = [line for line in text.splitlines()[-4 * count :] if line.strip()][-count:]
    return "\n".join(line if len(line) <= width else line[:width] + " …" for line in lines)


def with_live_seats(
    conn: sa.Connection, run_id: str, attempts: Sequence[AttemptView], logs: Sequence[LogEntry]
) -> list[AttemptView]:
    """The attempts with each running seat's :class:`LiveSeat`."""
    if not any(s.state == SeatState.RUNNING for a in attempts for s in a.seats):
        return list(attempts)
    counts = report_counts(conn, run_id)
    shown = []
    for attempt in attempts:
        seats = [_live(conn, run_id, seat, counts, logs) for seat in attempt.seats]
        shown.append(replace(attempt, seats=seats))
    return shown


def _live(
    conn: sa.Connection,
    run_id: str,
    seat: SeatView,
    counts: dict[tuple[int, int], int],
    logs: Sequence[LogEntry],
) -> SeatView:
    if seat.state != SeatState.RUNNING:
        return seat
    name = coder_log(list(logs), seat.attempt, seat.seat)
    entry = read_log(conn, run_id, name) if name else None
    live = LiveSeat(
        reports=counts.get((seat.attempt, seat.seat), 0),
        tokens=seat.tokens,
        cost_usd=seat.cost_usd,
        tail=last_lines(entry.text or "") if entry else "",
        log_updated_at=entry.updated_at if entry else None,
    )
    return replace(seat, live=live, log=name)
