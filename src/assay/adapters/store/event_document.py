"""One ledger event as the JSON object every reader outside the process sees.

The dashboard's ``/events`` stream and ``assay run|serve --events jsonl`` print the same
object, built here once: ``{"id", "at", "kind", "task_id", "run_id", "data"}``. This module
imports only the standard library, so the CLI can use it without loading the store.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Protocol


class StoredEvent(Protocol):
    """What a ledger event row has (``assay.adapters.store.records.Event``)."""

    @property
    def id(self) -> int: ...
    @property
    def at(self) -> datetime: ...
    @property
    def kind(self) -> str: ...
    @property
    def task_id(self) -> str | None: ...
    @property
    def run_id(self) -> str | None: ...
    @property
    def data(self) -> dict[str, Any]: ...


def event_document(event: StoredEvent) -> dict[str, Any]:
    """The event as one JSON-ready object; ``kind`` is the stored token (an ``EventKind``
    value, or the text a newer version wrote: shown, never refused)."""
    return {
        "id": event.id,
        "at": event.at.isoformat(),
        "kind": str(event.kind),
        "task_id": event.task_id,
        "run_id": event.run_id,
        "data": event.data,
    }


def event_line(event: StoredEvent) -> str:
    """The event as one compact JSON line (no newline): an SSE ``data:`` or a JSON Lines row."""
    return json.dumps(event_document(event), separators=(",", ":"), default=str)
