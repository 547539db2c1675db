"""How long a task waits after a run lost to a provider's rate limit or usage quota.

settle refunds such a run (the quota is a fact about the machine, not the task), so nothing in
the attempt budget slows a retry down; this wait does. The provider's own reset time is used
when it gave one, else an exponential backoff on how many quota-refunded runs came in a row,
so a rate-limit storm backs off instead of hammering the provider. Pure: time is passed in,
and (``core`` imports no clock module) moved with the given value's own methods.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import AwareDatetime

from assay.core.vocab import SettleRow

QUOTA_ROWS: frozenset[SettleRow] = frozenset(
    {SettleRow.STALLED_QUOTA, SettleRow.FAILED_QUOTA_NO_VIABLE}
)
"""The settle rows that mean "lost to quota": refunded, and followed by a wait."""

RESET_MARGIN_SECONDS = 5
"""Added to a provider's reset time: clocks differ a little, and a retry a few seconds late
costs nothing while one a few seconds early is another rate-limited run."""

DEFAULT_BASE_SECONDS = 60
DEFAULT_CAP_SECONDS = 3600


def quota_wait(
    reset_at: AwareDatetime | None,
    now: AwareDatetime,
    consecutive: int,
    base_seconds: float = DEFAULT_BASE_SECONDS,
    cap_seconds: float = DEFAULT_CAP_SECONDS,
) -> AwareDatetime:
    """The earliest time the task may run again; always after ``now``.

    ``reset_at`` (the provider's reset time) plus ``RESET_MARGIN_SECONDS`` when that is ahead of
    ``now``; a reset time already past says nothing useful, so it falls back to the backoff:
    ``base_seconds * 2 ** (consecutive - 1)``, capped at ``cap_seconds``. ``consecutive`` counts
    the quota-refunded runs in a row including this one (see ``quota_streak``); it must be at
    least 1, and ``base_seconds`` must be positive and no more than ``cap_seconds``.
    """
    if consecutive < 1:
        raise ValueError(f"consecutive must be at least 1, got {consecutive}")
    if not 0 < base_seconds <= cap_seconds:
        raise ValueError(f"need 0 < base_seconds <= cap_seconds, got {base_seconds}, {cap_seconds}")
    if reset_at is not None:
        given = _later(reset_at, RESET_MARGIN_SECONDS)
        if given is not None and given > now:
            return given
    # The exponent is bounded before it is used: past 2**64 every value is the cap anyway.
    seconds = min(cap_seconds, base_seconds * 2 ** min(consecutive - 1, 64))
    backoff = _later(now, seconds)
    if backoff is None:
        raise ValueError(f"{now.isoformat()} plus {seconds} s is past the last representable time")
    return backoff


def quota_streak(rows: Iterable[SettleRow | None]) -> int:
    """How many of the newest runs in a row were lost to quota; ``rows`` oldest first.

    Derived from the runs the ledger already holds, so no separate counter can drift from them.
    """
    streak = 0
    for row in rows:
        streak = streak + 1 if row in QUOTA_ROWS else 0
    return streak


def _later(moment: AwareDatetime, seconds: float) -> AwareDatetime | None:
    """``moment`` plus ``seconds`` in its own time zone; None when that is out of range (a
    provider's absurd reset time must not crash the close of a run)."""
    try:
        return moment.fromtimestamp(moment.timestamp() + seconds, tz=moment.tzinfo)
    except (OverflowError, OSError, ValueError):
        return None
