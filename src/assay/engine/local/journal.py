"""The run's event log, written as it happens, and the counts read back from it.

Every run event goes to the ledger's event log the moment it is emitted (a dispatch before its
coder runs), so a run that never reached its close — killed, interrupted, or broken by an
internal error — can still say how many attempts it made and how many coders ran.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from assay.adapters.store.records import DispatchRecord, Event
from assay.adapters.store.sql import Ledger
from assay.core.attempts import AttemptRecord
from assay.core.vocab import AttemptOutcome, EventKind, StopReason
from assay.engine.effects import RunEvent

EventSink = Callable[[RunEvent], None]


def journaled(
    ledger: Ledger,
    *,
    task_id: str,
    run_id: str,
    clock: Callable[[], datetime],
    then: EventSink | None = None,
) -> EventSink:
    """A sink that appends each event to the ledger, then hands it to ``then`` (the display)."""

    def sink(event: RunEvent) -> None:
        ledger.append_event(event.kind, event.data, at=clock(), task_id=task_id, run_id=run_id)
        if then is not None:
            then(event)

    return sink


@dataclass(frozen=True)
class JournaledRun:
    """What a run's event log says it did: its base, attempts and dispatch records."""

    base_commit: str | None
    base_branch: str | None
    attempts: list[AttemptRecord]
    dispatches: list[DispatchRecord]
    landing: JournaledLanding | None = None
    origin: str | None = None  # the remote whose base branch it is, when not this repository


@dataclass(frozen=True)
class JournaledLanding:
    """How far a ``pr`` landing got: the branch pushed, and the pull request if one opened."""

    branch: str
    remote: str | None
    blocked: bool
    pr_url: str | None = None


def read_journal(events: Sequence[Event], *, dispatch_id: str, fault: str) -> JournaledRun:
    """Rebuild a run's counts from its events.

    A dispatch counts from its ``dispatch.started``; without a ``seat.finished`` it is not
    viable. An attempt the validators decided keeps its outcome; any other attempt ended on
    ``fault`` (outcome ``error``).
    """
    base_commit: str | None = None
    base_branch: str | None = None
    origin: str | None = None
    started: dict[tuple[int, int], str] = {}
    finished: dict[tuple[int, int], dict[str, object]] = {}
    decided: dict[int, dict[str, object]] = {}
    landing: JournaledLanding | None = None
    for event in events:
        data = event.data
        if event.kind == EventKind.RUN_STARTED:
            base_commit = _text(data.get("base_commit"))
            base_branch = _text(data.get("base_branch"))
            origin = _text(data.get("origin"))
        elif event.kind == EventKind.DISPATCH_STARTED:
            started[(int(data["attempt"]), int(data["seat"]))] = str(data.get("coder") or "?")
        elif event.kind == EventKind.SEAT_FINISHED:
            finished[(int(data["attempt"]), int(data["seat"]))] = data
        elif event.kind == EventKind.ATTEMPT_DECIDED:
            decided[int(data["attempt"])] = data
        elif event.kind in (EventKind.LAND_PUSHED, EventKind.LAND_PR_OPENED) and _text(
            data.get("branch")
        ):
            landing = JournaledLanding(
                branch=str(data["branch"]),
                remote=_text(data.get("remote")) or (landing.remote if landing else None),
                blocked=data.get("blocked") is True,
                pr_url=_text(data.get("url")),
            )
    dispatches = [
        _dispatch_record(dispatch_id, attempt, seat, coder, finished.get((attempt, seat)))
        for (attempt, seat), coder in sorted(started.items())
    ]
    attempts = []
    for number in sorted({attempt for attempt, _ in started}):
        verdict = decided.get(number)
        if verdict is not None and verdict.get("outcome") in set(AttemptOutcome):
            outcome = AttemptOutcome(str(verdict["outcome"]))
            failures = [str(f) for f in _list(verdict.get("failures"))]
        else:
            outcome, failures = AttemptOutcome.ERROR, [fault]
        count = sum(1 for d in dispatches if d.attempt == number)
        attempts.append(
            AttemptRecord(
                attempt=number, outcome=outcome, coder_dispatches=count, failures=failures
            )
        )
    return JournaledRun(base_commit, base_branch, attempts, dispatches, landing, origin)


def _dispatch_record(
    dispatch_id: str, attempt: int, seat: int, coder: str, seen: dict[str, object] | None
) -> DispatchRecord:
    files = _list(seen.get("files")) if seen else []
    stop = _text(seen.get("stop_reason")) if seen else None
    return DispatchRecord(
        dispatch_id=f"{dispatch_id}.a{attempt}.s{seat}",
        attempt=attempt,
        seat=seat,
        coder=coder,
        viable=bool(seen.get("viable")) if seen else False,
        stop_reason=StopReason(stop) if stop in set(StopReason) else None,
        files_changed=len(files),
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def interrupted_last(attempts: list[AttemptRecord], reason: str) -> list[AttemptRecord]:
    """The attempts of a run closed as interrupted: the one it was in when its process died
    says so (an operational fault: ``error``), whatever its validators had said, since its
    change never landed."""
    if not attempts:
        return attempts
    last = attempts[-1]
    if last.outcome is AttemptOutcome.BLOCKED:
        return attempts  # decided and recovering: it did end blocked
    failures = last.failures if reason in last.failures else [*last.failures, reason]
    update = {"outcome": AttemptOutcome.ERROR, "interrupted": True, "failures": failures}
    return [*attempts[:-1], last.model_copy(update=update)]
