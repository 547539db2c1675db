"""What crosses between the workflow and its activities, beyond the effect boundary's values.

Every call to a run's worker carries the events the graph emitted since the last call that
worker acknowledged (``Pending``): an event costs no round trip of its own, and a retried or
concurrent call never writes one twice (each has its number in the run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from assay.core.contract import Contract
from assay.core.payload import HaltNotice
from assay.core.tasks import Task
from assay.engine.effects import OpenRequest, RunEvent, RunHandle
from assay.engine.temporal.config import Timeouts
from assay.engine.values import Candidate

C = TypeVar("C")


@dataclass(frozen=True)
class Pending:
    """Events not yet written: ``events[i]`` is the run's event number ``first + i``."""

    first: int = 1
    events: list[RunEvent] = field(default_factory=list)


@dataclass(frozen=True)
class Sent(Generic[C]):
    """A call to the run's worker, with the events it writes before performing it."""

    call: C
    pending: Pending = field(default_factory=Pending)
    # The workflow's number for this call (the same when it asks again after an outage), so
    # the worker hands over the work of the first asking instead of doing it twice.
    number: int | None = None


@dataclass(frozen=True)
class Dispatched:
    """A seat's candidate, and the run's fired halts as the worker saw them once that coder
    had ended: ``seen`` orders those looks, so the latest look of a wave (taken after every
    coder of it ended) answers the graph's ``fired_halts`` with no round trip of its own."""

    candidate: Candidate
    halts: list[HaltNotice]
    seen: int


@dataclass(frozen=True)
class Opened:
    """What ``open`` came to: the run's handle (its worker queue in ``handle.worker``) and the
    anchors that do not resolve (the worker armed the halts in the same call: two round trips
    saved), or ``None`` and why the task is not runnable."""

    handle: RunHandle | None
    unresolved: list[str] = field(default_factory=list)
    prepared: bool = False  # preflight and arm done; else the graph's own calls do them
    not_runnable: str | None = None


@dataclass(frozen=True)
class CloseIn:
    """Close an open run its graph never recorded: its worker was lost, or it was stopped.
    ``hold``: the operator's reason to hold the task once the run is closed."""

    task_id: str
    run_id: str | None  # None: no run was opened (only the hold is applied)
    reason: str
    hold: str | None = None
    contract: Contract | None = None  # the run's (from its plan); else the ledger's
    by: str | None = None  # who asked for the hold (``assay task stop``, the dashboard)
    via: str | None = None
    action: str = "hold"  # hold or cancel, as the operator asked


@dataclass(frozen=True)
class Closed:
    """A run closed from its journal (``closed_now``), or found closed already by its own
    record; the task as the ledger then holds it."""

    run_id: str | None
    status: str | None  # the run's RunStatus (None: there was no run)
    closed_now: bool
    task: Task
    runnable: bool


@dataclass(frozen=True)
class RunInput:
    """A workflow's input: the task, the shared queue (its workflow's), the timeouts, and the
    queue its opens and lost-run closes go to: its repository's (:func:`.config.
    repository_queue`), so only that repository's workers run it; None: the shared queue (a
    task that names no repository, or a workflow started before tasks kept one)."""

    task_id: str
    task_queue: str
    keep_worktrees: bool = False
    timeouts: Timeouts = field(default_factory=Timeouts)
    max_runs: int = 10  # lost workers in a row this workflow restarts the run for
    open_queue: str | None = None

    @property
    def opens_on(self) -> str:
        return self.open_queue or self.task_queue


@dataclass(frozen=True)
class StopRequest:
    reason: str
    hold: bool = True  # cancel and hold both hold the task (manual) once the run closed
    by: str | None = None  # who sent it (recorded with the hold); None: a workflow cancel
    via: str | None = None
    action: str = "hold"  # hold or cancel


@dataclass
class RunOutcome:
    """What a workflow came to, small enough for its history: each run it opened, how it
    ended, and the task's status after the last."""

    task_id: str
    runs: list[str] = field(default_factory=list)
    status: str | None = None  # the last run's RunStatus
    task_status: str | None = None
    lost: int = 0  # runs closed because their worker was lost
    stopped: bool = False
    note: str = ""
    payload_path: str | None = None  # the last run's payload, on the worker that ran it


__all__ = [
    "CloseIn",
    "Closed",
    "Dispatched",
    "OpenRequest",
    "Opened",
    "Pending",
    "RunInput",
    "RunOutcome",
    "Sent",
    "StopRequest",
]
