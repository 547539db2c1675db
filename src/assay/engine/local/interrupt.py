"""A stop request (SIGINT or SIGTERM) reaches a run at its next effect boundary.

The signal handler only records the request and stops the live child process groups
(:func:`assay.adapters.process.request_stop`); the run then raises :class:`RunInterrupted` at
the next boundary it reaches, in whatever thread it runs, and is closed as interrupted.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from assay.adapters.process import STOP_TICK_SECONDS, stop_requested
from assay.core.vocab import CrashPoint, OperatorMove, TaskStatus
from assay.engine.crashpoints import crash_point
from assay.engine.effects import RunStopped

T = TypeVar("T")


def run_awake(work: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(work)``, with the main thread woken every :data:`STOP_TICK_SECONDS`.

    Python runs a signal's handler only in the main thread, when it next runs bytecode. The
    kernel may hand SIGINT or SIGTERM to a thread that waits on a coder or a validator; an
    event loop asleep until that effect returns would then act on the stop only after the
    child ended by itself (a ``sleep 30`` ran its 30 s). The tick bounds that wait.
    """

    async def awake() -> T:
        ticking = asyncio.ensure_future(_tick())
        try:
            return await work
        finally:
            ticking.cancel()

    return asyncio.run(awake())


async def _tick() -> None:
    while True:
        await asyncio.sleep(STOP_TICK_SECONDS)


class RunInterrupted(RunStopped):
    """The operator asked assay to stop (``signum``); the run closes as interrupted."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum
        self.payload_path: str | None = None  # set once the run is closed as interrupted


@dataclass(frozen=True)
class UserStop:
    """The run was stopped by its own user (SIGINT or SIGTERM to ``assay run``), not by a
    crash or the end of a queue worker: its task is held (manual) by ``by`` (via ``via``) with
    :func:`stop_reason`, and stays stopped until someone releases it."""

    signum: int
    by: str
    via: str

    @property
    def reason(self) -> str:
        return stop_reason(self.signum)

    def saved(self) -> dict[str, Any]:
        """The ``task.saved`` event's data of the hold, as an operator's move records one."""
        move = {"status": TaskStatus.HELD.value, "action": OperatorMove.HOLD.value}
        return {**move, "by": self.by, "via": self.via, "reason": self.reason}


def stop_reason(signum: int) -> str:
    """Why a task its user stopped is held: ``stopped by the user (Ctrl-C)``, ``… (SIGTERM)``."""
    how = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    return f"stopped by the user ({how})"


def raise_if_stopping() -> None:
    signum = stop_requested()
    if signum is not None:
        raise RunInterrupted(signum)


def boundary(point: CrashPoint) -> None:
    """An effect boundary: the crash hook, then a pending stop request."""
    crash_point(point)
    raise_if_stopping()
