"""A stop request (SIGINT or SIGTERM) reaches a run at its next effect boundary.

The signal handler only records the request and stops the live child process groups
(:func:`assay.adapters.process.request_stop`); the run then raises :class:`RunInterrupted` at
the next boundary it reaches, in whatever thread it runs, and is closed as interrupted.
"""

from __future__ import annotations

import signal

from assay.adapters.process import stop_requested
from assay.core.vocab import CrashPoint
from assay.engine.crashpoints import crash_point
from assay.engine.effects import RunStopped


class RunInterrupted(RunStopped):
    """The operator asked assay to stop (``signum``); the run closes as interrupted."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum
        self.payload_path: str | None = None  # set once the run is closed as interrupted


def raise_if_stopping() -> None:
    signum = stop_requested()
    if signum is not None:
        raise RunInterrupted(signum)


def boundary(point: CrashPoint) -> None:
    """An effect boundary: the crash hook, then a pending stop request."""
    crash_point(point)
    raise_if_stopping()
