"""A running seat's logs (its coder's, then its validators') shipped to the ledger while they
run, on whichever machine runs it (this one, or a Temporal worker: both run seats through
:class:`LocalEffects`).

While a seat's coder runs, a provisional copy of its logs' ends goes to the ledger every
:data:`LIVE_EVERY` seconds when it changed (:meth:`LogShipper.ship_live`: at most one write
per interval, made safe without the secret scan). The seat leaves the running set before
anything ships its final logs, and a live write asks again under the shipper's lock, so a
provisional copy never lands after the final one. A ledger that refuses a live copy is no
fault of the run: the final ship says so if it still refuses.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from assay.adapters.live_logs import LIVE_EVERY
from assay.adapters.log_shipping import LogShipper
from assay.core.run_logs import KeptLog
from assay.core.vocab import LogRole

_T = TypeVar("_T")
Seat = tuple[int, int]  # (attempt, seat)


class LiveLogs:
    """Which seats' coders run now, and their logs shipped live while they do."""

    def __init__(
        self,
        shipper: LogShipper,
        found: Callable[[], set[tuple[str, str]]],
        every: float = LIVE_EVERY,
    ) -> None:
        self.shipper = shipper
        self.found = found  # the secrets the run's scans found so far
        self.every = every
        self.running: set[Seat] = set()

    async def during(
        self,
        run_id: str,
        run_dir: Path,
        seat: Seat,
        work: Callable[[], Awaitable[_T]],
        role: LogRole = LogRole.CODER,
    ) -> _T:
        """``work()`` (the seat's dispatch, or its checks), the seat's logs of ``role`` (its
        coder's, or its validators') shipped live until it ends."""
        self.running.add(seat)
        live = asyncio.create_task(self._ship(run_id, run_dir, seat, role))
        try:
            return await work()
        finally:
            self.running.discard(seat)  # before any final ship: no live copy lands after it
            live.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await live

    async def _ship(self, run_id: str, run_dir: Path, seat: Seat, role: LogRole) -> None:
        def running(log: KeptLog) -> bool:
            return log.role is role and (log.attempt, log.seat) == seat and seat in self.running

        while seat in self.running:
            await asyncio.sleep(self.every)
            try:
                await asyncio.to_thread(
                    self.shipper.ship_live, run_id, run_dir, self.found(), running
                )
            except Exception:  # a live copy is a courtesy: the final ship warns
                continue
