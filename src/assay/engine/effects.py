"""The Effects interface: every side effect of a run, as the graph sees it.

The graph (:mod:`assay.engine.graph.run`) decides; effects act. The local executor performs each
call in-process; the Temporal executor performs each as an activity. Keeping every step behind
this interface is what lets the graph be deterministic and tested without git or a model.

Every method takes one small serialisable value and returns one (see
:mod:`assay.engine.values`): a workflow's history holds them. A run's seats live on the
worker that opened it (:attr:`RunHandle.worker`); every later call of the run is performed
there, so dispatch, validate, judge, fire, fired_halts, land and record must reach that worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from assay.core.attempts import AttemptRecord
from assay.core.payload import HaltNotice, Payload
from assay.core.quota import Quota
from assay.core.settle import Settlement
from assay.core.tasks import Task
from assay.core.vocab import CanonicalHalt, RunStatus
from assay.engine.run_result import RunResult
from assay.engine.values import (
    Candidate,
    DispatchSummary,
    JudgeRound,
    LandOutcome,
    RunEvent,
    RunPlan,
    Validation,
)

__all__ = [
    "Candidate",
    "CandidateCall",
    "DispatchSummary",
    "EffectFault",
    "Effects",
    "FaultKind",
    "FireCall",
    "JudgeCall",
    "JudgeRound",
    "LandCall",
    "LandOutcome",
    "OpenRequest",
    "Quota",
    "RecordCall",
    "RunEvent",
    "RunHandle",
    "RunPlan",
    "RunRecorded",
    "RunStopped",
    "SeatCall",
    "Validation",
]

LOCAL_WORKER = "local"  # the worker of a run the local executor holds, in this process


@dataclass(frozen=True)
class OpenRequest:
    """Open a run of ``task_id`` under the id the executor chose (a workflow's is fixed by it,
    so a retried open never makes a second run)."""

    task_id: str
    run_id: str
    keep_worktrees: bool = False


@dataclass(frozen=True)
class RunHandle:
    """An open run: its plan, and the worker that holds its seats (its own task queue under
    Temporal; ``"local"`` in-process). Every later call of the run goes to that worker."""

    plan: RunPlan
    worker: str
    started_at: datetime


@dataclass(frozen=True)
class SeatCall:
    plan: RunPlan
    attempt: int
    seat: int
    prompt: str


@dataclass(frozen=True)
class CandidateCall:
    plan: RunPlan
    candidate: Candidate


@dataclass(frozen=True)
class JudgeCall:
    plan: RunPlan
    attempt: int
    candidates: list[Candidate]  # two or more viable ones


@dataclass(frozen=True)
class FireCall:
    plan: RunPlan
    halt: CanonicalHalt
    evidence: str


@dataclass(frozen=True)
class LandCall:
    """Land ``candidate`` by the contract's mode. ``blocked``: the validators still fail and
    the mode is ``pr``; leave it as a draft PR listing ``failures`` for a human. ``attempts``:
    the run's attempts so far (a merge's commit counts them)."""

    plan: RunPlan
    candidate: Candidate
    blocked: bool = False
    failures: list[str] = field(default_factory=list)
    attempts: list[AttemptRecord] = field(default_factory=list)


@dataclass(frozen=True)
class RecordCall:
    handle: RunHandle
    result: RunResult


@dataclass(frozen=True)
class RunRecorded:
    """A closed run: the task as settle left it, the payload, where it was written."""

    run_id: str
    status: RunStatus
    task: Task
    settlement: Settlement
    payload: Payload
    payload_path: str | None  # None when it could not be written (a warning says why)
    warnings: list[str] = field(default_factory=list)


class RunStopped(Exception):
    """The run is being stopped from outside (a signal, a cancellation, a lost worker): it
    propagates through the graph untouched and the executor closes the run."""


class FaultKind(StrEnum):
    ENVIRONMENT = "environment"  # the machine refused the effect (a full disk): refunded
    INTERNAL = "internal"  # a bug: the run fails as an internal error


class EffectFault(Exception):
    """An effect failed in a way that ends the run. The graph turns it into a failed result
    and still records the run; ``trace`` is the traceback, kept by the worker that records."""

    def __init__(self, kind: FaultKind, reason: str, trace: str = "") -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.trace = trace


class Effects(Protocol):
    async def open(self, call: OpenRequest) -> RunHandle:
        """Claim the task, create the run in the ledger, prepare this worker to hold it."""
        ...

    async def preflight(self, plan: RunPlan) -> list[str]:
        """Anchors of the contract that do not resolve at the base commit."""
        ...

    async def arm(self, plan: RunPlan) -> None: ...

    async def dispatch(self, call: SeatCall) -> Candidate:
        """Run one seat's coder. The seat is reset to its last state first, so a retried
        dispatch never starts on what an earlier, lost one left."""
        ...

    async def validate(self, call: CandidateCall) -> list[Validation]: ...

    async def judge(self, call: JudgeCall) -> JudgeRound:
        """Blind judges rank the candidates (two or more), reading their diffs on the worker."""
        ...

    async def fire(self, call: FireCall) -> None: ...

    async def fired_halts(self, plan: RunPlan) -> list[HaltNotice]: ...

    async def land(self, call: LandCall) -> LandOutcome: ...

    async def emit(self, event: RunEvent) -> None: ...

    async def record(self, call: RecordCall) -> RunRecorded:
        """Close the run: attest, settle, write the payload and the ledger's close (one
        transaction), keep what a run that did not land leaves for a look, remove the seats."""
        ...
