"""A run's page: the timeline from its event log, completed by what its close recorded.

The events say what happened as it happened (a live page of an open run reads nothing else,
so a run on a Temporal worker shows the same as a local one); once the run is closed its
attempt and dispatch rows are the authority for outcomes, labels and costs, and the documents
its close kept (payload, chosen diff, halt states) give the report, the diff and the halts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from assay.adapters.store.schema import attempts, dispatches, events, run_documents, runs, tasks
from assay.core.vocab import AttemptOutcome, EventKind
from assay.web import view_halts, view_usage
from assay.web.view_judges import tally_view
from assay.web.view_models import (
    AttemptState,
    AttemptView,
    ReportFile,
    ReportMark,
    ReportView,
    RunView,
    SeatState,
    SeatView,
    TallyView,
    Totals,
    ValidatorView,
)
from assay.web.view_queue import last_event_id, run_brief

_OUTCOME_STATE = {
    AttemptOutcome.PASSED.value: AttemptState.PASS,
    AttemptOutcome.WARNED.value: AttemptState.WARN,
    AttemptOutcome.BLOCKED.value: AttemptState.BLOCKED,
    AttemptOutcome.ERROR.value: AttemptState.ERROR,
}
PAYLOAD_FILE_LIMIT = 16 * 1024 * 1024  # a payload file larger than this is not read for a page


@dataclass
class _Seat:
    attempt: int
    seat: int
    coder: str = "?"
    finished: bool = False
    viable: bool = False
    lost_to_quota: bool = False
    label: str | None = None
    error: str | None = None
    files: list[str] = field(default_factory=list)
    tokens: int | None = None
    cost_usd: float | None = None
    wall_time_ms: int | None = None
    stop_reason: str | None = None
    started_at: datetime | None = None


@dataclass
class _Attempt:
    attempt: int
    started_at: datetime | None = None
    decided_at: datetime | None = None
    outcome: str | None = None
    seats: dict[int, _Seat] = field(default_factory=dict)
    validators: list[ValidatorView] = field(default_factory=list)
    tally: TallyView | None = None
    action: str | None = None
    next: str | None = None
    why: str | None = None
    chosen: int | None = None
    failures: list[str] = field(default_factory=list)

    def seat(self, number: int) -> _Seat:
        return self.seats.setdefault(number, _Seat(self.attempt, number))


@dataclass
class _Timeline:
    attempts: dict[int, _Attempt] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    land: dict[str, Any] = field(default_factory=dict)

    def attempt(self, number: int) -> _Attempt:
        return self.attempts.setdefault(number, _Attempt(number))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _strings(value: Any, limit: int = 200) -> list[str]:
    return [str(v) for v in value[:limit]] if isinstance(value, list) else []


def read_events(timeline: _Timeline, rows: Any) -> None:
    """Lay the run's events onto the timeline, oldest first; a malformed event is skipped."""
    for kind, at, data in rows:
        if not isinstance(data, dict):
            continue
        number = _int(data.get("attempt"))
        if kind == EventKind.WARNING.value and isinstance(data.get("message"), str):
            timeline.warnings.append(data["message"])
        elif kind == EventKind.LAND_PUSHED.value:
            timeline.land.setdefault("branch", data.get("branch"))
        elif kind == EventKind.LAND_PR_OPENED.value:
            timeline.land["pr_url"] = data.get("url") or data.get("pr_url")
        if number is None:
            continue
        attempt = timeline.attempt(number)
        if kind == EventKind.ATTEMPT_STARTED.value:
            attempt.started_at = at
        elif kind == EventKind.DISPATCH_STARTED.value and _int(data.get("seat")) is not None:
            seat = attempt.seat(data["seat"])
            seat.coder = str(data.get("coder") or seat.coder)
            seat.started_at = at
            attempt.started_at = attempt.started_at or at
        elif kind == EventKind.SEAT_FINISHED.value and _int(data.get("seat")) is not None:
            _seat_finished(attempt.seat(data["seat"]), data)
        elif kind == EventKind.VALIDATOR_FINISHED.value and isinstance(data.get("validator"), str):
            attempt.validators.append(_validator(number, data))
        elif kind == EventKind.JUDGES_RANKED.value:
            attempt.tally = tally_view(number, data)
        elif kind == EventKind.ATTEMPT_DECIDED.value:
            _decided(attempt, at, data)


def _decided(attempt: _Attempt, at: datetime, data: dict[str, Any]) -> None:
    """The decision; a field the event does not hold well keeps what was known."""
    attempt.decided_at = at
    if isinstance(data.get("outcome"), str):
        attempt.outcome = data["outcome"]
    attempt.action = _opt(data.get("action")) or attempt.action
    attempt.next = _opt(data.get("next")) or attempt.next
    attempt.why = _opt(data.get("why")) or attempt.why
    chosen = _int(data.get("seat"))
    attempt.chosen = chosen if chosen is not None else attempt.chosen
    if isinstance(data.get("failures"), list):
        attempt.failures = _strings(data["failures"])


def _opt(value: Any) -> str | None:
    return str(value) if value is not None else None


def _seat_finished(seat: _Seat, data: dict[str, Any]) -> None:
    seat.finished = True
    seat.coder = str(data.get("coder") or seat.coder)
    seat.viable = bool(data.get("viable"))
    seat.files = _strings(data.get("files"), limit=1000)
    seat.error = _opt(data.get("error"))
    seat.stop_reason = _opt(data.get("stop_reason"))
    seat.tokens = _int(data.get("tokens_used"))
    seat.cost_usd = _float(data.get("cost_usd"))
    seat.wall_time_ms = _int(data.get("wall_time_ms"))


def _validator(attempt: int, data: dict[str, Any]) -> ValidatorView:
    return ValidatorView(
        attempt=attempt,
        seat=_int(data.get("seat")) or 0,
        validator_id=str(data.get("validator") or "?"),
        severity=str(data.get("severity") or "?"),
        # An advisory validator that could not run only warned; its text says why.
        error=bool(data.get("error")) and not data.get("advisory"),
        justification=str(data.get("justification") or ""),
        findings=_strings(data.get("findings"), limit=20),
    )


def read_rows(timeline: _Timeline, conn: sa.Connection, run_id: str) -> None:
    """A closed run's attempt and dispatch rows: the recorded outcome, failures, labels,
    quota losses and costs."""
    for row in conn.execute(sa.select(attempts).where(attempts.c.run_id == run_id)):
        attempt = timeline.attempt(row.attempt)
        attempt.outcome = row.outcome
        if isinstance(row.failures, list) and row.failures:
            attempt.failures = [str(f) for f in row.failures]
    for row in conn.execute(sa.select(dispatches).where(dispatches.c.run_id == run_id)):
        seat = timeline.attempt(row.attempt).seat(row.seat)
        seat.finished = True
        seat.coder, seat.label, seat.viable = row.coder, row.label, row.viable
        seat.lost_to_quota = row.lost_to_quota
        seat.stop_reason = row.stop_reason or seat.stop_reason
        seat.tokens = row.tokens_used if row.tokens_used is not None else seat.tokens
        seat.cost_usd = row.cost_usd if row.cost_usd is not None else seat.cost_usd
        seat.wall_time_ms = row.wall_time_ms if row.wall_time_ms is not None else seat.wall_time_ms


def _seat_view(seat: _Seat, closed: bool, chosen: bool) -> SeatView:
    if seat.lost_to_quota:
        state = SeatState.LOST_TO_QUOTA
    elif seat.finished:
        state = SeatState.VIABLE if seat.viable else SeatState.NOT_VIABLE
    else:
        state = SeatState.INTERRUPTED if closed else SeatState.RUNNING
    return SeatView(
        attempt=seat.attempt,
        seat=seat.seat,
        coder=seat.coder,
        label=seat.label,
        state=state.value,
        error=seat.error,
        files=seat.files,
        tokens=seat.tokens,
        cost_usd=seat.cost_usd,
        wall_time_ms=seat.wall_time_ms,
        stop_reason=seat.stop_reason,
        chosen=chosen,
        started_at=seat.started_at,
    )


def _attempt_view(attempt: _Attempt, closed: bool) -> AttemptView:
    if attempt.outcome in _OUTCOME_STATE:
        state = _OUTCOME_STATE[attempt.outcome].value
    else:
        state = (AttemptState.INTERRUPTED if closed else AttemptState.RUNNING).value
    seats = [
        _seat_view(attempt.seats[n], closed, n == attempt.chosen) for n in sorted(attempt.seats)
    ]
    return AttemptView(
        attempt=attempt.attempt,
        state=state,
        started_at=attempt.started_at,
        decided_at=attempt.decided_at,
        seats=seats,
        validators=attempt.validators,
        tally=attempt.tally,
        action=attempt.action,
        next=attempt.next,
        why=attempt.why,
        failures=attempt.failures,
    )


def _totals(seats: list[SeatView]) -> Totals:
    """Summed over the seats (the dispatch rows of a closed run, the events of an open one),
    never the payload's usage, which counts an unreported token figure as 0: a figure no seat
    reported is unknown, and a cost is unknown as soon as one seat's is."""
    tokens = [s.tokens for s in seats if s.tokens is not None]
    walls = [s.wall_time_ms for s in seats if s.wall_time_ms is not None]
    costs = [s.cost_usd for s in seats]
    known = [c for c in costs if c is not None]
    return Totals(
        sum(tokens) if tokens else None,
        round(sum(known), 6) if known and len(known) == len(costs) else None,
        sum(walls) if walls else None,
    )


def _report(payload: dict[str, Any] | None) -> ReportView | None:
    report = payload.get("coder_report") if payload else None
    if not isinstance(report, dict):
        return None
    missing = set(_strings(report.get("claimed_but_missing"), limit=1000))
    unclaimed = _strings(report.get("unclaimed_but_present"), limit=1000)
    files = []
    for entry in report.get("files") or []:
        path = entry.get("path") if isinstance(entry, dict) else None
        if isinstance(path, str):
            mark = ReportMark.CLAIMED_BUT_MISSING if path in missing else ReportMark.OK
            files.append(ReportFile(path=path, mark=mark.value))
    files.extend(ReportFile(p, ReportMark.UNCLAIMED_BUT_PRESENT.value) for p in unclaimed)
    return ReportView(
        summary=_opt(report.get("summary")),
        files=files,
        stop_reason=_opt(report.get("stop_reason")),
        turns_used=_int(report.get("turns_used")),
        tokens_used=_int(report.get("tokens_used")),
        cost_usd=_float(report.get("cost_usd")),
    )


def _fill_validators(timeline: _Timeline, payload: dict[str, Any] | None) -> None:
    """Events written before validators' output was journaled carry no output: the payload's
    results (the chosen candidate's, in the last judged attempt) fill it in."""
    results = payload.get("validator_results") if payload else None
    decided = [a for a in timeline.attempts.values() if a.chosen is not None]
    if not isinstance(results, list) or not decided:
        return
    last = max(decided, key=lambda a: a.attempt)
    by_id = {r.get("validator_id"): r for r in results if isinstance(r, dict)}
    filled = []
    for view in last.validators:
        result = by_id.get(view.validator_id)
        if view.seat == last.chosen and result and not view.justification and not view.findings:
            justification = str(result.get("justification") or "")[-2000:]
            findings = _strings(result.get("findings"), limit=20)
            view = replace(view, justification=justification, findings=findings)  # noqa: PLW2901
        filled.append(view)
    last.validators = filled


def payload_of(conn: sa.Connection, run_id: str, payload_path: str | None) -> dict[str, Any] | None:
    """The run's payload: the ledger's copy, else its payload file when it is readable here."""
    kept = conn.execute(
        sa.select(run_documents.c.payload).where(run_documents.c.run_id == run_id)
    ).scalar()
    if isinstance(kept, dict):
        return kept
    return payload_file(payload_path)


def payload_file(payload_path: str | None) -> dict[str, Any] | None:
    if not payload_path:
        return None
    path = Path(payload_path)
    try:
        if path.stat().st_size > PAYLOAD_FILE_LIMIT:
            return None
        document = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def build_run_view(conn: sa.Connection, run_id: str, state_dir: Path | None) -> RunView | None:
    newest = last_event_id(conn)
    row = conn.execute(sa.select(runs).where(runs.c.id == run_id)).first()
    if row is None:
        return None
    brief = run_brief(row)
    title = conn.execute(sa.select(tasks.c.title).where(tasks.c.id == row.task_id)).scalar()
    timeline = _Timeline()
    read_events(
        timeline,
        conn.execute(
            sa.select(events.c.kind, events.c.at, events.c.data)
            .where(events.c.run_id == run_id)
            .order_by(events.c.id)
        ),
    )
    document = None
    payload = None
    if not brief.open:
        read_rows(timeline, conn, run_id)
        document = conn.execute(
            sa.select(run_documents).where(run_documents.c.run_id == run_id)
        ).first()
        payload = document.payload if document is not None else payload_file(row.payload_path)
        payload = payload if isinstance(payload, dict) else None
        _fill_validators(timeline, payload)
    views = [_attempt_view(timeline.attempts[n], not brief.open) for n in sorted(timeline.attempts)]
    usage, by_seat = view_usage.run_usage(conn, run_id)
    views = view_usage.with_seat_usage(views, by_seat)
    seats = [s for a in views for s in a.seats]
    chosen = next((s for a in reversed(views) for s in a.seats if s.chosen), None)
    changed = chosen.files if chosen else []
    halts = payload.get("halts") if payload else None
    payload_halts = (
        [
            *(halts.get("fired") or []),
            *(halts.get("warnings") or []),
        ]
        if isinstance(halts, dict)
        else None
    )
    land = payload.get("land") if payload else None
    if not isinstance(land, dict):
        land = {"mode": None, **timeline.land} if timeline.land else None
    return RunView(
        run=brief,
        title=str(title or ""),
        attempts=views,
        totals=view_usage.totals(_totals(seats), usage),
        coder_report=_report(payload),
        changed_files=changed,
        diff=document.diff if document is not None else None,
        diff_truncated=bool(document.diff_truncated) if document is not None else False,
        halts=view_halts.halt_views(
            view_halts.dispatch_of(run_id, row.dispatch_id),
            state_dir=state_dir,
            kept=document.halt_states if document is not None else None,
            journal=view_halts.run_journal(conn, run_id),
            payload_halts=payload_halts,
        ),
        warnings=timeline.warnings,
        land=land,
        sandbox=_opt(payload.get("sandbox")) if payload else None,
        payload_available=payload is not None,
        usage=usage,
        last_event_id=newest,
    )
