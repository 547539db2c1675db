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
    drain: Callable[[int], str | None] | None = None,
) -> Iterator[None]:
    """Handle SIGINT/SIGTERM by a graceful stop while the block runs (main thread only);
    ``said`` is what the first signal prints after its name, through ``notice`` when given
    (a live display: its footer must not take the line) or straight to stderr. ``drain``: a
    first SIGTERM is offered to it first; when it takes it (it answers what to say), that is
    printed and nothing is stopped here (the caller stops taking work and ends what it
    holds); SIGINT, or a SIGTERM it declines (None), stops at once."""

    def say(line: str) -> None:
        if notice is not None:
            notice(line)
        else:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(line + "\n")

    def handler(signum: int, _frame: FrameType | None) -> None:
        if stop_requested() is None and signum == signal.SIGTERM and drain is not None:
            draining = drain(signum)
            if draining is not None:
                say(f"assay: SIGTERM: {draining}")
                return
        if stop_requested() is None:
            say(f"assay: {signal.Signals(signum).name}: {said}")
        request_stop(signum)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
