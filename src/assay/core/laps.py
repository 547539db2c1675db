"""Finding signatures and the oscillation rule, as plain functions (no pydantic).

:class:`assay.core.ledger.ConvergenceLedger` is built from these; a reader that prints a
task's ledger without building the model (``assay ledger show`` on the standard library's
``sqlite3``) uses the same functions, so the two cannot disagree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

MAX_LAP_HISTORY = 20
"""Lap signature sets kept (newest); ``laps`` itself stays exact. Lists are bounded."""

_WHITESPACE = re.compile(r"\s+")


def normalise_finding(text: str) -> str:
    """One finding's signature: runs of whitespace collapsed to one space, ends stripped."""
    return _WHITESPACE.sub(" ", text).strip()


def finding_signatures(findings: Iterable[str]) -> list[str]:
    """The signature set of some findings: normalised, empties dropped, unique, sorted.

    Two attempts that failed "the same way" then compare equal even when a validator's
    output differs only in spacing or order.
    """
    return sorted({sig for sig in (normalise_finding(f) for f in findings) if sig})


def oscillating(lap_signatures: Sequence[Sequence[str]], window: int = 2) -> bool:
    """Whether the newest lap repeats a failure seen within the ``window`` laps before it.

    Precisely: the newest lap's signature set is non-empty and equals the signature set of
    at least one of the ``window`` laps immediately before it. With the default window of
    2 this catches both a stuck loop (A, A) and a two-step oscillation (A, B, A). A lap with
    no findings never oscillates: an empty set is what progress looks like.
    """
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    if not lap_signatures:
        return False
    newest = list(lap_signatures[-1])
    if not newest:
        return False
    return any(list(lap) == newest for lap in lap_signatures[-1 - window : -1])
