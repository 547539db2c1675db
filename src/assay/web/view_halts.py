"""A run's halts, and the page of fired halts waiting for an operator.

Where a halt stands is read from the best source in sight: the dispatch's state file when it
is on this machine (the live truth, and the only one a re-arm can act on), else the state
document the run's close kept in the ledger. The ledger's journal (``halt.fired`` and
``halt.rearmed`` events) is laid over either: a firing the file no longer shows still fired
(the coder can edit its file, never the journal), and a re-arm journaled after the close
document was written moves the halt back to ARMED. With no state at all (an open run on
another machine) a journaled firing is shown with its lifecycle unknown.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from assay.adapters.store.halt_files import StateFileError, read_state, state_path
from assay.adapters.store.schema import events, run_documents, runs, tasks
from assay.core.halts import HaltState
from assay.core.statefile import HaltStateFile, parse_state_document
from assay.core.vocab import EventKind, HaltLifecycle, HaltSeverity
from assay.web.view_models import FiredHaltRow, HaltsPage, HaltView

_JOURNAL_KINDS = (EventKind.HALT_FIRED.value, EventKind.HALT_REARMED.value)


@dataclass
class HaltJournal:
    """A run's halt events: the newest firing per halt name, and when each was re-armed."""

    fired: dict[str, dict[str, Any]] = field(default_factory=dict)
    fired_at: dict[str, datetime] = field(default_factory=dict)
    rearmed_at: dict[str, datetime] = field(default_factory=dict)

    def add(self, kind: str, at: datetime, data: Any) -> None:
        if not isinstance(data, dict):
            return
        if kind == EventKind.HALT_FIRED.value and isinstance(data.get("name"), str):
            self.fired[data["name"]] = data
            self.fired_at[data["name"]] = at
        elif kind == EventKind.HALT_REARMED.value and isinstance(data.get("condition"), str):
            self.rearmed_at[data["condition"]] = at

    def rearmed_since_fired(self, name: str) -> bool:
        rearmed = self.rearmed_at.get(name)
        fired = self.fired_at.get(name)
        return rearmed is not None and (fired is None or rearmed >= fired)


def dispatch_of(run_id: str, dispatch_id: str | None) -> str:
    """The id a run's halt state file is named by."""
    return dispatch_id or run_id


def rearm_command(dispatch_id: str, name: str, state_dir: Path | None) -> str:
    """The exact command that re-arms a fired halt, evidence left for the operator."""
    command = f"assay halt rearm --dispatch-id {shlex.quote(dispatch_id)} --condition {name}"
    if state_dir is not None:
        command += f" --state-dir {shlex.quote(str(state_dir))}"
    return command + ' --evidence "<what was remedied>"'


def local_state(state_dir: Path | None, dispatch_id: str) -> HaltStateFile | None:
    """The dispatch's state file on this machine, when it is here and readable."""
    if state_dir is None:
        return None
    try:
        path = state_path(state_dir, dispatch_id)
    except ValueError:
        return None
    if not path.is_file():
        return None
    try:
        return read_state(path)
    except StateFileError:
        return None


def kept_state(document: Any) -> HaltStateFile | None:
    """The state document a run's close kept, when it parses."""
    if not isinstance(document, dict):
        return None
    parsed = parse_state_document(document)
    return parsed if isinstance(parsed, HaltStateFile) else None


def halt_views(
    dispatch_id: str,
    *,
    state_dir: Path | None,
    kept: Any,
    journal: HaltJournal,
    payload_halts: list[dict[str, Any]] | None = None,
) -> list[HaltView]:
    """Every halt of the dispatch as the page shows it (see the module's docstring)."""
    local = local_state(state_dir, dispatch_id)
    state = local or kept_state(kept)
    here = local is not None
    views: list[HaltView] = []
    seen: set[str] = set()
    for halt in state.halts if state else ():
        seen.add(halt.name)
        views.append(_from_state(dispatch_id, halt, journal, here, state_dir))
    firings = dict(journal.fired)
    for notice in payload_halts or []:
        if isinstance(notice, dict) and isinstance(notice.get("name"), str):
            firings.setdefault(notice["name"], {**notice, "evidence": notice.get("detail")})
    for name, data in firings.items():
        if name in seen:
            continue
        views.append(
            HaltView(
                dispatch_id=dispatch_id,
                name=name,
                severity=str(data.get("severity") or HaltSeverity.BLOCK.value),
                lifecycle=HaltLifecycle.ARMED.value if journal.rearmed_since_fired(name) else None,
                detail=str(data.get("evidence") or ""),
                fired_at=_text(data.get("fired_at")),
                history=[],
                rearm_command=None,
                rearmable_here=False,
            )
        )
    return views


def _from_state(
    dispatch_id: str, halt: HaltState, journal: HaltJournal, here: bool, state_dir: Path | None
) -> HaltView:
    lifecycle = halt.lifecycle
    evidence = halt.evidence or {}
    detail, fired_at = str(evidence.get("detail") or ""), halt.fired_at
    journaled = journal.fired.get(halt.name)
    if (
        journaled is not None
        and not halt.has_fired
        and not halt.history
        and not journal.rearmed_since_fired(halt.name)
    ):
        # The file no longer shows a firing the ledger journaled: the journal wins.
        lifecycle = HaltLifecycle.FIRED
        detail, fired_at = str(journaled.get("evidence") or ""), _text(journaled.get("fired_at"))
    elif not here and lifecycle is HaltLifecycle.FIRED and journal.rearmed_since_fired(halt.name):
        lifecycle = HaltLifecycle.ARMED  # re-armed after the close kept this document
    fired = lifecycle is HaltLifecycle.FIRED
    return HaltView(
        dispatch_id=dispatch_id,
        name=halt.name,
        severity=halt.severity.value,
        lifecycle=lifecycle.value,
        detail=detail,
        fired_at=fired_at,
        history=[h.to_json() for h in halt.history],
        rearm_command=rearm_command(dispatch_id, halt.name, state_dir if here else None)
        if fired
        else None,
        rearmable_here=here,
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def needs_operator(halt: HaltView) -> bool:
    """A halt still fired: FIRED in its state, or journaled as fired (block) with no state in
    sight and no re-arm since."""
    if halt.lifecycle is not None:
        return halt.lifecycle == HaltLifecycle.FIRED.value
    return halt.severity == HaltSeverity.BLOCK.value


def run_journal(conn: sa.Connection, run_id: str) -> HaltJournal:
    journal = HaltJournal()
    query = (
        sa.select(events.c.kind, events.c.at, events.c.data)
        .where(events.c.run_id == run_id, events.c.kind.in_(_JOURNAL_KINDS))
        .order_by(events.c.id)
    )
    for kind, at, data in conn.execute(query):
        journal.add(kind, at, data)
    return journal


def fired_rows(conn: sa.Connection, state_dir: Path | None) -> list[FiredHaltRow]:
    """Every halt still fired, newest firing first: runs with a journaled firing or a kept
    state document that shows one are the candidates; each is read as its run page reads it."""
    journals: dict[str, HaltJournal] = {}
    query = (
        sa.select(events.c.run_id, events.c.kind, events.c.at, events.c.data)
        .where(events.c.run_id.is_not(None), events.c.kind.in_(_JOURNAL_KINDS))
        .order_by(events.c.id)
    )
    for run_id, kind, at, data in conn.execute(query):
        journals.setdefault(run_id, HaltJournal()).add(kind, at, data)
    kept_fired = sa.cast(run_documents.c.halt_states, sa.Text).like('%"FIRED"%')
    candidates = set(journals) | set(
        conn.execute(sa.select(run_documents.c.run_id).where(kept_fired)).scalars()
    )
    if not candidates:
        return []
    query = (
        sa.select(
            runs.c.id,
            runs.c.task_id,
            runs.c.dispatch_id,
            runs.c.started_at,
            tasks.c.status,
            tasks.c.title,
            run_documents.c.halt_states,
        )
        .select_from(
            runs.join(tasks, tasks.c.id == runs.c.task_id).outerjoin(
                run_documents, run_documents.c.run_id == runs.c.id
            )
        )
        .where(runs.c.id.in_(sorted(candidates)))
    )
    found: list[tuple[str, datetime, FiredHaltRow]] = []
    for row in conn.execute(query):
        views = halt_views(
            dispatch_of(row.id, row.dispatch_id),
            state_dir=state_dir,
            kept=row.halt_states,
            journal=journals.get(row.id, HaltJournal()),
        )
        for view in views:
            if needs_operator(view):
                fired = FiredHaltRow(row.task_id, row.status, row.id, view, row.title)
                found.append((view.fired_at or "", row.started_at, fired))
    found.sort(key=lambda entry: (entry[0], entry[1]), reverse=True)
    return [row for _fired, _started, row in found]


def halts_page_of(
    conn: sa.Connection, state_dir: Path | None, page: int, per_page: int, newest: int
) -> HaltsPage:
    rows = fired_rows(conn, state_dir)
    per_page = max(1, min(per_page, 500))
    pages = max(1, math.ceil(len(rows) / per_page))
    page = max(1, min(page, pages))
    start = (page - 1) * per_page
    return HaltsPage(
        rows=rows[start : start + per_page],
        page=page,
        per_page=per_page,
        total=len(rows),
        pages=pages,
        last_event_id=newest,
    )
