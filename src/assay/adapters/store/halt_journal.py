"""Halt firings journaled in the ledger, where the coder's edits to its state file cannot reach.

``assay halt check --fire`` appends a ``halt.fired`` event for the dispatch's run the moment a
halt fires (when the state folder sits in an assay home with a ledger: a coder inside a run);
the engine journals every firing it observes in the file too. The engine's record of a run's
fired halts is the union of this journal and the file, so a later rewrite cannot unfire one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.adapters.store.names import DATABASE_URL_ENV
from assay.core.payload import HaltNotice
from assay.core.vocab import HaltSeverity

if TYPE_CHECKING:  # only a type here: the halt CLI must not pay for the store's imports
    from assay.adapters.store.records import Event

HALT_FIRED_EVENT = "halt.fired"


def event_data(notice: HaltNotice, *, by: str) -> dict[str, str | None]:
    """What a ``halt.fired`` event holds: name, severity, evidence, when, and who saw it."""
    return {
        "name": notice.name,
        "severity": notice.severity.value,
        "evidence": notice.detail,
        "fired_at": notice.fired_at,
        "by": by,
    }


def journaled_firings(events: Iterable[Event]) -> list[HaltNotice]:
    """The firings a run's events journaled (malformed events are skipped, never raised)."""
    found = []
    for event in events:
        if event.kind != HALT_FIRED_EVENT:
            continue
        data = event.data
        fired_at = data.get("fired_at")
        try:
            found.append(
                HaltNotice(
                    name=str(data["name"]),
                    severity=HaltSeverity(data["severity"]),
                    detail=str(data.get("evidence") or ""),
                    fired_at=fired_at if isinstance(fired_at, str) else None,
                )
            )
        except (KeyError, ValueError):
            continue
    return found


def journal_fired(state_dir: Path, dispatch_id: str, current_state: Mapping[str, Any]) -> None:
    """Best effort, from ``assay halt check --fire``: journal the firing in the ledger of the
    assay home the state folder belongs to, for the run of that dispatch. Nothing happens when
    there is no such ledger or run (the halt command used on its own); nothing ever raises."""
    url = os.environ.get(DATABASE_URL_ENV)
    database = state_dir.parent / "assay.db"
    if not url:
        if not database.is_file():
            return
        url = f"sqlite:///{database}"
    try:
        from assay.adapters.store.sql import Ledger

        evidence = current_state.get("evidence")
        notice = HaltNotice(
            name=str(current_state["name"]),
            severity=HaltSeverity(current_state["severity"]),
            detail=str(evidence.get("detail", "")) if isinstance(evidence, dict) else "",
            fired_at=current_state.get("fired_at"),
        )
        ledger = Ledger(url)
        try:
            run = ledger.get_run(dispatch_id)
            ledger.append_event(
                HALT_FIRED_EVENT,
                event_data(notice, by="halt check"),
                at=datetime.now(UTC),
                task_id=run.task_id,
                run_id=run.id,
            )
        finally:
            ledger.close()
    except Exception:  # no run of that id, a ledger elsewhere: the engine's own reads remain
        return
