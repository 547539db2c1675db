"""A long-running service's log: every line it writes to stderr starts with the UTC time.

``assay worker`` runs for days and its stderr is its log (its own lines, run warnings, the
Temporal SDK's log records with their tracebacks): a line without a time cannot be matched
with the ledger's events or another machine's log. Standard output keeps its documents as
they are (``--json`` lines carry their own ``at``).
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TextIO


def utc_stamp() -> str:
    """Now, as ``2026-12-05T22:22:44.123Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Timestamped(io.TextIOBase):
    """``stream``, each line it is written started with ``stamp()`` and a space (a line
    written in pieces is stamped once, at its start)."""

    def __init__(self, stream: TextIO, stamp: Callable[[], str] = utc_stamp) -> None:
        self._stream = stream
        self._stamp = stamp
        self._line_start = True

    def write(self, text: str) -> int:
        pieces = []
        for piece in text.splitlines(keepends=True):
            if self._line_start:
                pieces.append(f"{self._stamp()} ")
            pieces.append(piece)
            self._line_start = piece.endswith(("\n", "\r"))
        self._stream.write("".join(pieces))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._stream.encoding


def stamp_stderr() -> None:
    """From now on, every line this process writes to ``sys.stderr`` is stamped."""
    if not isinstance(sys.stderr, Timestamped):
        sys.stderr = Timestamped(sys.stderr)
