"""SIGINT and SIGTERM stop a run gracefully: coders stopped, the run closed as interrupted.

While ``assay run`` or ``assay serve`` works, both signals only record the request and stop
the live child process groups (TERM, then KILL after a grace period); each run raises at its
next effect boundary, closes as interrupted (refunded), and the command exits 128 + the
signal: 130 for SIGINT, 143 for SIGTERM. The tasks ``assay run`` was running or had yet to
run are held (their user stopped them: :mod:`assay.cli.stopped`); ``assay serve``'s run again
(the queue stopped, not its tasks).
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable, Iterator
from types import FrameType

from assay.adapters.process import request_stop, stop_requested

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_code_for_signal(signum: int) -> int:
    return 128 + signum


def interrupted_exit() -> int | None:
    """The exit code a received stop signal asks for, or None when none came."""
    signum = stop_requested()
    return exit_code_for_signal(signum) if signum is not None else None


@contextlib.contextmanager
def graceful_stop(
    said: str = "stopping the coders and closing the run",
    notice: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Handle SIGINT/SIGTERM by a graceful stop while the block runs (main thread only);
    ``said`` is what the first signal prints after its name, through ``notice`` when given
    (a live display: its footer must not take the line) or straight to stderr."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        if stop_requested() is None:
            line = f"assay: {signal.Signals(signum).name}: {said}"
            if notice is not None:
                notice(line)
            else:
                with contextlib.suppress(OSError, ValueError):
                    sys.stderr.write(line + "\n")
        request_stop(signum)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def draining_stop(
    drain: Callable[[int], bool],
    said: str = "stopping the coders and closing the run",
    draining_said: str = "draining",
) -> Iterator[None]:
    """:func:`graceful_stop`, except that a first SIGTERM is offered to ``drain`` first: when
    it takes it (True), only ``draining_said`` is printed and nothing is stopped here (the
    caller stops taking work and ends what it holds). SIGINT, a SIGTERM ``drain`` declines (a
    second one, or no drain asked for) stop at once, as :func:`graceful_stop` does."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        if stop_requested() is None and signum == signal.SIGTERM and drain(signum):
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(f"assay: SIGTERM: {draining_said}\n")
            return
        if stop_requested() is None:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(f"assay: {signal.Signals(signum).name}: {said}\n")
        request_stop(signum)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
