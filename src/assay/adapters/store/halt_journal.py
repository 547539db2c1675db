"""Halt firings journaled in the ledger, where a later rewrite of a state file cannot reach.

Inside a run, ``assay halt check`` never touches the state file: it asks the engine's halt
relay (:mod:`assay.engine.local.halt_relay`, through :mod:`assay.adapters.store.halt_relay_client`),
and the engine performs the move on its own file and journals a firing as a ``halt.fired``
event before it answers. Used on its own (no relay), the command journals a firing it made in
the ledger of the assay home the state folder belongs to (:func:`journal_fired`). The engine
journals every firing it observes in the file too; its record of a run's fired halts is the
union of this journal and the file, so a later rewrite cannot unfire one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.adapters.store.names import DATABASE_URL_ENV
from assay.core.vocab import EventKind, HaltSeverity

if TYPE_CHECKING:  # only types here: the halt CLI must not pay for pydantic or the store
    from assay.adapters.store.records import Event
    from assay.core.payload import HaltNotice


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
    from assay.core.payload import HaltNotice

    found = []
    for event in events:
        if event.kind != EventKind.HALT_FIRED:
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
    """Best effort, from ``assay halt check --fire`` used outside a run's sandbox: journal the
    firing in the ledger of the assay home the state folder belongs to, for the run of that
    dispatch. Nothing happens when there is no such ledger or run (the halt command used on
    its own); nothing ever raises."""
    _journal_in_ledger(state_dir, dispatch_id, current_state)


def journal_rearmed(
    state_dir: Path, dispatch_id: str, condition: str, evidence: str, *, by: str, via: str
) -> None:
    """Best effort, from ``assay halt rearm``: append ``halt.rearmed`` to the ledger of the
    assay home the state folder belongs to, for the run of that dispatch, so the dashboard
    shows who re-armed it and why. Nothing happens without such a ledger or run; never
    raises (the state file holds the re-arm; the exit code stays seed 002's)."""
    url = _ledger_url(state_dir)
    if url is None:
        return
    data = {
        "dispatch_id": dispatch_id,
        "condition": condition,
        "evidence": evidence,
        "by": by,
        "via": via,
    }
    try:
        import sqlalchemy as sa

        from assay.adapters.store.schema import runs
        from assay.adapters.store.sql import Ledger

        ledger = Ledger(url)
        try:
            query = sa.select(runs.c.id, runs.c.task_id).where(
                sa.or_(runs.c.dispatch_id == dispatch_id, runs.c.id == dispatch_id)
            )
            with ledger.read() as conn:
                row = conn.execute(query.limit(1)).first()
            if row is None:
                return
            at = datetime.now(UTC)
            kind = EventKind.HALT_REARMED
            ledger.append_event(kind, data, at=at, task_id=row.task_id, run_id=row.id)
        finally:
            ledger.close()
    except Exception:  # a ledger elsewhere or unreachable: the state file still holds it
        return


def _ledger_url(state_dir: Path) -> str | None:
    """The ledger a state folder's halts belong to: ``$ASSAY_DATABASE_URL``, else the
    ``assay.db`` beside the folder (an assay home's ``halt-state``), else None."""
    url = os.environ.get(DATABASE_URL_ENV)
    if url:
        return url
    database = state_dir.parent / "assay.db"
    return f"sqlite:///{database}" if database.is_file() else None


def _journal_in_ledger(state_dir: Path, dispatch_id: str, current_state: Mapping[str, Any]) -> None:
    url = _ledger_url(state_dir)
    if url is None:
        return
    try:
        from assay.adapters.store.sql import Ledger
        from assay.core.payload import HaltNotice

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
                EventKind.HALT_FIRED,
                event_data(notice, by="halt check"),
                at=datetime.now(UTC),
                task_id=run.task_id,
                run_id=run.id,
            )
        finally:
            ledger.close()
    except Exception:  # no run of that id, a ledger elsewhere: the engine's own reads remain
        return
