"""A run's effects scripted and recorded: the world either executor acts on, without git.

:class:`ScriptedEffects` implements the whole :class:`~assay.engine.effects.Effects` protocol
(and what a worker needs to hold a run) from a :class:`Script`, and records every call it is
made, in order, with its value. The local executor drives it directly (``run_graph``); the
Temporal one through its workflow, the table's activities and a worker that holds the run
(:class:`ScriptedWorker`), so what each executor asked of the world can be compared.
:func:`temporal_workers` registers those activities under their production names on the
three queues a real worker polls, with the production workflow in its sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from temporalio import activity
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from assay.adapters.coders.base import DispatchResult
from assay.core.changes import ChangeSet, FileDelta
from assay.core.contract import Budgets, Contract, ValidatorSpec
from assay.core.payload import HaltNotice, build_payload
from assay.core.results import ValidatorResult
from assay.core.settle import settle
from assay.core.tally import tally
from assay.core.tasks import Task
from assay.core.vocab import (
    CanonicalHalt,
    FileChangeKind,
    HaltSeverity,
    RunStatus,
    Severity,
)
from assay.engine.effects import (
    Candidate,
    CandidateCall,
    FireCall,
    JudgeCall,
    JudgeRound,
    LandCall,
    LandOutcome,
    OpenRequest,
    RecordCall,
    RunEvent,
    RunHandle,
    RunPlan,
    RunRecorded,
    SeatCall,
    Validation,
)
from assay.engine.local.to_values import candidate_of
from assay.engine.temporal.calls import Closed, CloseIn, Opened, RunInput
from assay.engine.temporal.config import Timeouts, close_queue
from assay.engine.temporal.holding import RunsHeld
from assay.engine.temporal.table import Queue
from assay.engine.temporal.worker import workflow_runner
from assay.engine.temporal.workflow import RunWorkflow

T = TypeVar("T")
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
WARN_HALTS = (CanonicalHalt.BUDGET_EXHAUSTED, CanonicalHalt.VERIFICATION_GAP)


@dataclass
class Script:
    """What the world answers: per attempt, the validators' verdict on every seat (the last
    one repeats); a halt the coders fire in an attempt; a seat's change."""

    verdicts: list[Severity] = field(default_factory=lambda: [Severity.PASS])
    coder_fires: dict[int, CanonicalHalt] = field(default_factory=dict)
    seats: int = 1
    judges: int = 0
    dispatch_hangs: bool = False  # each dispatch waits until it is cancelled
    forgotten: bool = False  # the worker forgets the run once open (as a restarted one does)
    arm_fails_once: bool = False  # the first arm raises (the graph's own arm then succeeds)


def contract_of(script: Script) -> Contract:
    return Contract(
        task="Fix slugify.",
        seats=script.seats,
        judges=script.judges,
        budgets=Budgets(max_recovery=2),
        validators=[ValidatorSpec(id="tests", run="pytest -q")],
    )


@dataclass(frozen=True)
class Called:
    """One call the world was made: the effect's name and the value it was given."""

    name: str
    value: Any


class ScriptedEffects:
    """The effects of one run, answered from ``script``; ``calls`` in the order made."""

    def __init__(self, script: Script, home: Path) -> None:
        self.script = script
        self.home = home
        self.calls: list[Called] = []
        self.fired: list[HaltNotice] = []
        self.closed = False

    def _called(self, name: str, value: Any) -> None:
        self.calls.append(Called(name, value))

    # -- what a worker holding the run needs --------------------------------------------------

    def run_dir(self, plan: RunPlan) -> Path:
        return self.home / plan.run_id

    def close(self) -> None:
        self.closed = True

    # -- the effects ---------------------------------------------------------------------------

    async def open(self, call: OpenRequest) -> RunHandle:
        self._called("open", call)
        plan = RunPlan(
            call.task_id,
            call.run_id,
            call.run_id,
            contract_of(self.script),
            Path("/repo"),
            "base",
            "main",
        )
        self.run_dir(plan).mkdir(parents=True, exist_ok=True)
        return RunHandle(plan, "local", NOW)

    async def preflight(self, plan: RunPlan) -> list[str]:
        self._called("preflight", plan)
        return []

    async def arm(self, plan: RunPlan) -> None:
        self._called("arm", plan)
        if self.script.arm_fails_once and [c.name for c in self.calls].count("arm") == 1:
            raise RuntimeError("the halt-state folder is not there yet")

    async def dispatch(self, call: SeatCall) -> Candidate:
        self._called("dispatch", call)
        if self.script.dispatch_hangs:
            await asyncio.Event().wait()
        fires = self.script.coder_fires.get(call.attempt)
        if fires is not None and call.seat == 1:
            self.fired.append(HaltNotice(name=fires.value, severity=HaltSeverity.BLOCK))
        change = ChangeSet(
            base_commit="base",
            files=[FileDelta(path=f"src/seat{call.seat}.py", kind=FileChangeKind.MODIFIED)],
        )
        return candidate_of(
            seat=call.seat,
            attempt=call.attempt,
            coder="scripted",
            result=DispatchResult(exit_code=0),
            change=change,
        )

    async def validate(self, call: CandidateCall) -> list[Validation]:
        self._called("validate", call)
        verdicts = self.script.verdicts
        severity = verdicts[min(call.candidate.attempt, len(verdicts)) - 1]
        findings = [] if severity is Severity.PASS else ["test_slug failed"]
        result = ValidatorResult(validator_id="tests", severity=severity, findings=findings)
        return [Validation(result=result)]

    async def judge(self, call: JudgeCall) -> JudgeRound:
        self._called("judge", call)
        labels = {c.seat: "ABCDEFG"[i] for i, c in enumerate(call.candidates)}
        ranking = [labels[seat] for seat in sorted(labels)]  # the lowest seat ranked first
        judges = call.plan.contract.judges
        return JudgeRound(
            tally=tally(ranking, judges, [ranking] * judges, call.plan.run_id),
            labels=labels,
            calls=judges,
        )

    async def fire(self, call: FireCall) -> None:
        self._called("fire", call)
        severity = HaltSeverity.WARN if call.halt in WARN_HALTS else HaltSeverity.BLOCK
        self.fired.append(HaltNotice(name=call.halt.value, severity=severity, detail=call.evidence))

    async def fired_halts(self, plan: RunPlan) -> list[HaltNotice]:
        self._called("fired_halts", plan)
        return list(self.fired)

    async def land(self, call: LandCall) -> LandOutcome:
        self._called("land", call)
        status = RunStatus.BLOCKED if call.blocked else RunStatus.MERGED
        return LandOutcome(status, f"{status.value}: seat {call.candidate.seat}", "assay/x")

    async def emit(self, event: RunEvent) -> None:
        self._called("emit", event)

    async def record(self, call: RecordCall) -> RunRecorded:
        self._called("record", call)
        plan, result = call.handle.plan, call.result
        task = Task(id=plan.task_id, title="t", instruction="i", created_at=NOW, updated_at=NOW)
        task.start(NOW, run_id=plan.run_id)
        settled = settle(task, result.verdict, result.reason, 3, NOW)
        payload = build_payload(
            task_id=plan.task_id,
            run_id=plan.run_id,
            dispatch_id=plan.dispatch_id,
            status=result.status,
            halt_type=result.halt_type,
            reason=result.reason,
            task_status=settled.new_status,
            attempt_spent=settled.attempt_spent,
            task_spec=plan.contract.task,
            attempts=result.attempts,
            started_at=NOW,
            finished_at=NOW,
        )
        where = str(self.run_dir(plan) / "payload.json")
        return RunRecorded(plan.run_id, result.status, task, settled, payload, where)


class ScriptedWorker(RunsHeld):
    """A worker holding scripted runs: the production per-run side (events that ride with the
    calls, the look at fired halts after each dispatch, faults by name), with ``open`` and
    ``close`` answered without a ledger. ``effects`` is every run's world, in the order
    opened; ``closes`` every close asked of this worker."""

    def __init__(self, queue: str, home: Path, script: Callable[[int], Script]) -> None:
        super().__init__(queue=queue, heartbeat_every=0.1)
        self.home = home
        self.script = script
        self.effects: list[ScriptedEffects] = []
        self.closes: list[tuple[str, CloseIn]] = []  # the queue each close came on, and it
        self.runnable_after_close = True  # else settle held the task (its refunds spent)

    async def open(self, call: OpenRequest) -> Opened:
        fx = ScriptedEffects(self.script(len(self.effects) + 1), self.home)
        self.effects.append(fx)
        opened = await self.hold(fx, call)
        if fx.script.forgotten:
            self.runs.pop(call.run_id)
        return opened

    async def close(self, call: CloseIn) -> Closed:
        self.closes.append((activity.info().task_queue, call))
        held = self.runs.get(call.run_id or "")
        if held is not None:
            self._let_go(call.run_id or "")
        task = Task(id=call.task_id, title="t", instruction="i", created_at=NOW, updated_at=NOW)
        if call.hold is not None:
            task.hold(call.hold, NOW)
        elif not self.runnable_after_close:
            task.hold("refunds spent", NOW)
        status = "failed" if call.run_id else None
        return Closed(call.run_id, status, call.run_id is not None, task, task.runnable(NOW))


@contextlib.asynccontextmanager
async def temporal_workers(client: Client, worker: RunsHeld, shared: str) -> AsyncIterator[None]:
    """``worker``'s activities under their production names on the queues a real worker polls
    (the shared one with the workflow, its own, the close queue), the workflow sandboxed."""
    polls = [
        Worker(
            client,
            task_queue=shared,
            workflows=[RunWorkflow],
            workflow_runner=workflow_runner(),
            activities=worker.on(Queue.SHARED),
        ),
        Worker(client, task_queue=worker.queue, activities=worker.on(Queue.RUN)),
        Worker(client, task_queue=close_queue(shared), activities=[worker.closing()]),
    ]
    async with polls[0], polls[1], polls[2]:
        yield


@dataclass(frozen=True)
class TemporalEnv:
    """A session's test environment and the event loop its client lives on."""

    env: WorkflowEnvironment
    loop: asyncio.AbstractEventLoop

    def run(self, scenario: Callable[[Client], Awaitable[T]]) -> T:
        return self.loop.run_until_complete(scenario(self.env.client))


def queue_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def run_input(task_id: str, shared: str, **timeouts: float) -> RunInput:
    return RunInput(task_id=task_id, task_queue=shared, timeouts=Timeouts(**timeouts))


async def wait_for(check: Callable[[], bool], timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)
