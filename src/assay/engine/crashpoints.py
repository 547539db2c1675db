"""A test hook that ends the process at a named effect boundary, as ``kill -9`` would.

``ASSAY_CRASH_AT=<point>`` ends the process the first time it reaches ``<point>`` (a
:class:`~assay.core.vocab.CrashPoint`); ``<point>:<n>`` the n-th time (counted in this
process). The exit is ``os._exit(137)``: no ``finally``, no flush, no lock released by
Python, so recovery is tested against exactly what a crash leaves. Unset, it costs one
environment lookup.
"""

from __future__ import annotations

import os
import threading
from collections import Counter

from assay.core.vocab import CrashPoint

CRASH_ENV = "ASSAY_CRASH_AT"
CRASH_EXIT = 137  # what a shell reports for a process killed by SIGKILL

_reached: Counter[CrashPoint] = Counter()
_guard = threading.Lock()


def parse_crash_at(value: str) -> tuple[CrashPoint, int] | None:
    """``"<point>"`` or ``"<point>:<n>"`` (n ≥ 1); None for anything else."""
    name, _, count = value.strip().partition(":")
    try:
        point = CrashPoint(name)
        n = int(count) if count else 1
    except ValueError:
        return None
    return (point, n) if n >= 1 else None


def crash_point(point: CrashPoint) -> None:
    """End the process here if ``ASSAY_CRASH_AT`` names this boundary (and this occurrence)."""
    wanted = os.environ.get(CRASH_ENV)
    if not wanted:
        return
    target = parse_crash_at(wanted)
    if target is None or target[0] is not point:
        return
    with _guard:
        _reached[point] += 1
        if _reached[point] == target[1]:
            os._exit(CRASH_EXIT)
