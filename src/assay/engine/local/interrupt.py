"""A stop request reaches a run at its next effect boundary: SIGINT or SIGTERM to assay, or an
operator's request to stop this one run (``assay task stop``, the dashboard's stop button).

The signal handler only records the request and stops the live child process groups
(:func:`assay.adapters.process.request_stop`); an operator's request is a file in the run's
folder, its groups ended by whoever wrote it (:mod:`assay.adapters.stop_request`). The run
then raises :class:`RunInterrupted` at the next boundary it reaches, in whatever thread it
runs, and is closed as interrupted.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from assay.adapters.process import STOP_TICK_SECONDS, stop_requested
from assay.adapters.stop_request import StopAsk, asked
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
    """The operator asked assay to stop (``signum``), or asked this run to stop (``ask``:
    ``assay task stop``, the dashboard); the run closes as interrupted."""

    def __init__(self, signum: int, ask: StopAsk | None = None) -> None:
        said = f"stopped by {ask.by} ({ask.via})" if ask else None
        super().__init__(said or f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum
        self.ask = ask
        self.payload_path: str | None = None  # set once the run is closed as interrupted

    def user_stop(self, by: str | None, via: str) -> UserStop | None:
        """Who stopped the run, for its close to hold the task: the operator whose request
        stopped it, else ``by`` (the run's own user, when there is one)."""
        if self.ask is not None:
            return UserStop.of_ask(self.ask)
        return UserStop(self.signum, by, via) if by else None


@dataclass(frozen=True)
class UserStop:
    """The run was stopped by its own user (SIGINT or SIGTERM to ``assay run``), not by a
    crash or the end of a queue worker: its task is held (manual) by ``by`` (via ``via``) with
    :func:`stop_reason`, and stays stopped until someone releases it."""

    signum: int
    by: str
    via: str
    action: str = OperatorMove.HOLD.value  # an operator's stop request: hold or cancel
    said: str | None = None  # its reason; None: the signal's (:func:`stop_reason`)

    @classmethod
    def of_ask(cls, ask: StopAsk) -> UserStop:
        """An operator's request to stop the run, as the hold its close applies."""
        return cls(signal.SIGTERM, ask.by, ask.via, action=ask.action, said=ask.reason)

    @property
    def reason(self) -> str:
        return self.said or stop_reason(self.signum)

    def saved(self) -> dict[str, Any]:
        """The ``task.saved`` event's data of the hold, as an operator's move records one."""
        move = {"status": TaskStatus.HELD.value, "action": self.action}
        return {**move, "by": self.by, "via": self.via, "reason": self.reason}


def stop_reason(signum: int) -> str:
    """Why a task its user stopped is held: ``stopped by the user (Ctrl-C)``, ``… (SIGTERM)``."""
    how = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    return f"stopped by the user ({how})"


def raise_if_stopping() -> None:
    signum = stop_requested()
    if signum is not None:
        raise RunInterrupted(signum)
    ask = asked()
    if ask is not None:
        raise RunInterrupted(signal.SIGTERM, ask)


def boundary(point: CrashPoint) -> None:
    """An effect boundary: the crash hook, then a pending stop request."""
    crash_point(point)
    raise_if_stopping()
