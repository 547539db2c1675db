"""The local executor: every Effects call performed in-process, on this machine.

Coders run in threads (each one a child process in its seat's own repository and sandbox,
see :mod:`assay.engine.local.seating`), so the seats of an attempt run in parallel while the graph
itself stays single-threaded and deterministic. One :class:`LocalEffects` holds one run: it
opens it (claims the task, creates the run, takes the run folder's lock), keeps what stays on
the worker (the seats, each candidate's diff, the halt watch, the secrets found) and records
its close. The Temporal executor's worker holds one per open run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from assay.adapters import git
from assay.adapters.assay_exe import with_assay_on_path
from assay.adapters.envpolicy import agent_environment
from assay.adapters.log_shipping import LogShipper
from assay.adapters.process import EnvironmentFault
from assay.adapters.process_groups import GROUPS_FILE, recording_groups
from assay.adapters.redact import SecretRedaction
from assay.adapters.report_file import read_report_file
from assay.adapters.run_files import writing
from assay.adapters.safe_files import write_file
from assay.adapters.store import halt_files, halt_ops
from assay.adapters.store.halt_journal import journaled_firings
from assay.adapters.store.halt_relay_client import RELAY_ENV
from assay.adapters.store.sql import Ledger
from assay.adapters.validators.base import ValidationOutcome
from assay.core.anchors import unresolved_anchors
from assay.core.changes import ChangeSet
from assay.core.contract import Contract
from assay.core.payload import HaltNotice, Payload
from assay.core.report import CoderReport, read_coder_report
from assay.core.results import ValidatorResult
from assay.core.run_logs import KeptLog
from assay.core.tasks import Task
from assay.core.vocab import CanonicalHalt, CrashPoint, EventKind, LogRole, RunStatus
from assay.engine.crashpoints import crash_point
from assay.engine.effects import (
    LOCAL_WORKER,
    Candidate,
    CandidateCall,
    EffectFault,
    FaultKind,
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
from assay.engine.local.close import close_interrupted, open_run, record_run
from assay.engine.local.halts import HaltKeeper
from assay.engine.local.interrupt import RunInterrupted, UserStop, boundary
from assay.engine.local.journal import journaled
from assay.engine.local.live_logs import LiveLogs
from assay.engine.local.merge import land_candidate
from assay.engine.local.metering import RunMeter
from assay.engine.local.panel import judge_blind
from assay.engine.local.seating import Seating
from assay.engine.local.seats import dispatch_seat, validate_seat
from assay.engine.local.site import Clock, SeatWork
from assay.engine.local.to_values import validation_of

EventSink = Callable[[RunEvent], None]
BUDGET_SPENT = CanonicalHalt.BUDGET_EXHAUSTED
_P = ParamSpec("_P")
_T = TypeVar("_T")


def utc_now() -> datetime:
    return datetime.now(UTC)


def machine_faults(
    method: Callable[_P, Coroutine[Any, Any, _T]],
) -> Callable[_P, Coroutine[Any, Any, _T]]:
    """The machine refusing a write of the run's own (a full disk) ends the run as a refunded
    environment error: said at the boundary as an :class:`EffectFault`."""

    @functools.wraps(method)
    async def effect(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return await method(*args, **kwargs)
        except EnvironmentFault as fault:
            raise EffectFault(FaultKind.ENVIRONMENT, f"environment error: {fault}") from fault

    return effect


class LocalEffects:
    """Effects for one run of ``task`` on this machine. ``home`` is the repository's
    ``.assay`` folder; ``sink`` the live display; ``started_at`` when the executor began
    the run (else when it opens); ``origin`` the remote the run starts from and lands on
    (None: this repository itself)."""

    def __init__(
        self,
        *,
        repo: Path,
        home: Path,
        ledger: Ledger,
        task: Task,
        contract: Contract,
        operator_env: Mapping[str, str],
        sink: EventSink | None = None,
        clock: Clock = utc_now,
        started_at: datetime | None = None,
        origin: str | None = None,
    ) -> None:
        self.repo = repo
        self.origin = origin
        self.home = home
        self.ledger = ledger
        self.task = task
        self.contract = contract
        self.clock = clock
        self.started_at = started_at
        self.display = sink
        self.sink: EventSink | None = None  # the ledger's journal, then the display, once open
        self.operator_env = dict(operator_env)
        self.events: list[RunEvent] = []
        self.seating = Seating(home, self.operator_env)
        self.warnings: list[str] = []
        # What each dispatch left here: the coder's result, the diff, the seat's repository.
        self.work: dict[tuple[int, int], SeatWork] = {}
        # The latest validation of each (attempt, seat): what a merge's commit says of it.
        self.results: dict[tuple[int, int], list[ValidatorResult]] = {}
        # Every tree the checks ran on: the only trees a landing may put on the base branch.
        self.validated: set[str] = set()
        # Every secret value the scan found in this run, and what replaces it where it is kept.
        self.redaction = SecretRedaction()
        # Ships the run's logs to the ledger as its dispatches and checks end, and at its close:
        # a seat's once its checks ended (or it left nothing to check), an attempt's judges'
        # once they ranked, so nothing the secret scan may still find is ever shipped.
        self.logs = LogShipper(ledger, self.operator_env, clock)
        # While a seat's coder runs, a provisional copy of its logs (made safe without the scan).
        self.live = LiveLogs(self.logs, lambda: set(self.redaction.found))
        self._coders_done: set[tuple[int, int]] = set()
        self._checks_done: set[tuple[int, int]] = set()
        self._judges_done: set[int] = set()
        # Events come from the graph's thread, the threads it hands work to, and the relay's.
        self._lock = threading.RLock()
        self.halts = HaltKeeper(
            self.state_dir(),
            lock=self._lock,
            record=self._record,
            journaled=self.journaled_firings,
            warn=self._warn,
        )
        self.plan: RunPlan | None = None
        self.keep_worktrees = False
        self.run_lock: int | None = None  # the run folder's lock, held while the run lives
        self._meter: RunMeter | None = None

    # -- paths -------------------------------------------------------------------------------

    def run_dir(self, plan: RunPlan) -> Path:
        return self.home / "runs" / plan.run_id

    def state_dir(self) -> Path:
        return self.home / "halt-state"

    # -- the run's life ----------------------------------------------------------------------

    async def open(self, call: OpenRequest) -> RunHandle:
        plan, started = open_run(self, call)
        self.sink = journaled(
            self.ledger, task_id=plan.task_id, run_id=plan.run_id, clock=self.clock,
            then=self.display,
        )  # fmt: skip
        crash_point(CrashPoint.TASK_STARTED)
        return RunHandle(plan=plan, worker=LOCAL_WORKER, started_at=started)

    def journaled_firings(self) -> Sequence[HaltNotice]:
        """The ledger's halt.fired events of this run: firings the state file cannot take back."""
        if self.plan is None:
            return []
        return journaled_firings(self.ledger.events(run_id=self.plan.run_id))

    async def record(self, call: RecordCall) -> RunRecorded:
        try:
            return record_run(self, call.handle, call.result)
        finally:  # every log, an internal error's trace too: the run is over
            await self.ship_logs(call.handle.plan, everything=True)

    def interrupted(self, stop: RunInterrupted, stopped: UserStop | None = None) -> None:
        """A stop request ended the run: close it as interrupted, from its journal; ``stopped``:
        by its own user, whose task stays stopped (held)."""
        close_interrupted(self, stop, stopped)

    def close(self) -> None:
        """The run is over here: stop the halt relays, remove their sockets, free the run
        folder's lock (idempotent)."""
        self.halts.close()
        lock, self.run_lock = self.run_lock, None
        if lock is not None:
            os.close(lock)

    # -- effects -----------------------------------------------------------------------------

    @machine_faults
    async def preflight(self, plan: RunPlan) -> list[str]:
        def read(path: str) -> str | None:
            return git.read_file_at(plan.repo_root, plan.base_commit, path)

        return await asyncio.to_thread(unresolved_anchors, plan.contract.anchors, read)

    @machine_faults
    async def arm(self, plan: RunPlan) -> None:
        run_dir = self.run_dir(plan)
        run_dir.mkdir(parents=True, exist_ok=True)
        contract_file = run_dir / "contract.json"
        with writing(contract_file):  # a full disk here is the run's environment error
            halt_files.write_json_atomic(contract_file, plan.contract.model_dump(mode="json"))
        document, code = halt_ops.arm(contract_file, plan.dispatch_id, self.state_dir())
        if code != 0:
            raise RuntimeError(f"arming halts failed: {json.dumps(document['violations'])}")
        await asyncio.to_thread(self.halts.armed, plan)
        boundary(CrashPoint.ARMED)

    @machine_faults
    async def dispatch(self, call: SeatCall) -> Candidate:
        try:
            with self._recording(call.plan):
                candidate = await self.live.during(
                    call.plan.run_id,
                    self.run_dir(call.plan),
                    (call.attempt, call.seat),
                    lambda: dispatch_seat(self, call),
                )
        except Exception:  # crashed: what its coder wrote is shipped all the same
            self._coders_done.add((call.attempt, call.seat))
            await self.ship_logs(call.plan)
            raise
        if candidate.commit is None:  # nothing to check: its logs go now, else after its checks
            self._coders_done.add((call.attempt, call.seat))
            await self.ship_logs(call.plan)
        return candidate

    @machine_faults
    async def validate(self, call: CandidateCall) -> list[Validation]:
        outcomes = await self.validate_candidate(call.plan, call.candidate)
        return [validation_of(o) for o in outcomes]

    async def validate_candidate(
        self,
        plan: RunPlan,
        candidate: Candidate,
        change: ChangeSet | None = None,
        commit: str | None = None,
    ) -> list[ValidationOutcome]:
        """The checks of ``candidate`` (``change`` and ``commit``: another tree, when a landing
        revalidates the change combined with a moved base)."""
        seat = (candidate.attempt, candidate.seat)

        def checks() -> Awaitable[list[ValidationOutcome]]:
            return validate_seat(self, plan, candidate.attempt, candidate.seat, change, commit)

        try:
            with self._recording(plan):
                if seat in self._checks_done:  # a landing's revalidation: no live copies
                    outcomes = await checks()
                else:  # the validators' output reaches the ledger while they run
                    run_dir = self.run_dir(plan)
                    role = LogRole.VALIDATOR
                    outcomes = await self.live.during(plan.run_id, run_dir, seat, checks, role)
        except Exception:
            self._coders_done.add(seat)
            self._checks_done.add(seat)
            await self.ship_logs(plan)
            raise
        self._coders_done.add(seat)  # its output was scanned, and redacted if it held a secret
        self._checks_done.add(seat)
        await self.ship_logs(plan)
        return outcomes

    @machine_faults
    async def judge(self, call: JudgeCall) -> JudgeRound:
        plan, attempt = call.plan, call.attempt
        workdir = self.run_dir(plan) / f"attempt-{attempt}" / "judges"
        with self._recording(plan):
            panel = await judge_blind(
                plan,
                attempt,
                {c.seat: self.change_of(c) for c in call.candidates},
                operator_env=self.operator_env,
                workdir=workdir,
                sandbox=await asyncio.to_thread(self.seating.judge_sandbox, plan),
                meter=self.meter(plan),
            )
        for problem in panel.problems:  # a judge that cannot run says so on stderr
            self._warn(f"attempt {attempt}: {problem}")
        self._judges_done.add(attempt)
        await self.ship_logs(plan)
        boundary(CrashPoint.JUDGED)
        spent = self.meter(plan).held_by()
        return replace(panel, budget=spent) if spent is not None else panel

    @machine_faults
    async def fire(self, call: FireCall) -> None:
        # A refusal (already FIRED and sticky) leaves the earlier firing, which is what counts.
        plan = call.plan
        await asyncio.to_thread(
            halt_ops.check,
            plan.dispatch_id,
            call.halt.value,
            self.state_dir(),
            fire=True,
            evidence=call.evidence,
        )
        self.halts.watch(plan)  # journal the engine's own firing at once

    @machine_faults
    async def fired_halts(self, plan: RunPlan) -> list[HaltNotice]:
        """Every firing seen in the run (the file's and the ledger's journal), and, when the
        file was removed or went backwards while the coder ran, that tampering as a block."""
        return self.halts.watch(plan)

    @machine_faults
    async def land(self, call: LandCall) -> LandOutcome:
        boundary(CrashPoint.LANDING_INTENT)
        with self._recording(call.plan):
            outcome = await asyncio.to_thread(
                land_candidate,
                self,
                call.plan,
                call.candidate,
                call.blocked,
                call.failures,
                call.attempts,
            )
        if outcome.status is RunStatus.MERGED:
            crash_point(CrashPoint.REF_MOVED)  # landed, nothing recorded yet: never interrupted
        return outcome

    async def emit(self, event: RunEvent) -> None:
        self._record(event)

    # -- what stays on this worker -----------------------------------------------------------

    def change_of(self, candidate: Candidate) -> ChangeSet:
        """The candidate's change with its diff, as its dispatch read it here."""
        return self.work[(candidate.attempt, candidate.seat)].change

    @contextlib.contextmanager
    def _recording(self, plan: RunPlan) -> Iterator[None]:
        """Every process group the effect starts is written down, for recovery to stop."""
        with recording_groups(self.run_dir(plan) / GROUPS_FILE):
            yield

    # -- helpers -----------------------------------------------------------------------------

    def meter(self, plan: RunPlan) -> RunMeter:
        """The run's spending meter, made on first use from the ledger's usage journal."""
        with self._lock:
            if self._meter is None:
                self._meter = RunMeter(
                    self.ledger,
                    task_id=plan.task_id,
                    run_id=plan.run_id,
                    limits=plan.contract.budgets.limits,
                    clock=self.clock,
                    display=self.display,
                    warn=self._warn,
                    fire=functools.partial(
                        self.halts.fire_now, plan, CanonicalHalt.BUDGET_EXHAUSTED
                    ),
                )
            return self._meter

    async def ship_logs(self, plan: RunPlan, *, everything: bool = False) -> None:
        """Ship what changed of the run's finished logs (``everything``: all of them) to the
        ledger, redacted and bounded (:mod:`assay.adapters.log_shipping`); a ledger that
        refuses is a warning, never a fault of the run (its close ships them again)."""
        ready = None if everything else self._log_ready
        try:
            await asyncio.to_thread(
                self.logs.ship, plan.run_id, self.run_dir(plan), set(self.redaction.found), ready
            )
        except Exception as exc:
            cause = " ".join(str(exc).split())[:200] or type(exc).__name__
            # A ledger that is down refuses the warning's event too: it stays in the payload's
            # warnings, and the run goes on (its next write says whether the ledger is back).
            with contextlib.suppress(Exception):
                self._warn(f"the run's logs were not shipped to the ledger: {cause}")

    def _log_ready(self, log: KeptLog) -> bool:
        if log.role is LogRole.CODER:
            return (log.attempt, log.seat) in self._coders_done
        if log.role is LogRole.VALIDATOR:
            return (log.attempt, log.seat) in self._checks_done
        if log.role is LogRole.JUDGE:
            return log.attempt in self._judges_done
        return False  # the run's own: at its close

    def warn(self, message: str) -> None:
        """A run warning, once per message: in the payload, the ledger's events and on the
        live display (stderr)."""
        self._warn(message)

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)
            self._record(RunEvent(EventKind.WARNING, {"message": message}))

    def read_report(
        self, attempt: int, seat: int, path: Path, folder: Path, keep: Path | None = None
    ) -> CoderReport | None:
        """The coder's report file, read safely (and what was read kept at ``keep``, in the
        engine's folder); any problem is one run warning, never a fault."""
        read = read_report_file(path, folder)
        if read.data is not None and keep is not None:
            try:
                write_file(keep.parent, keep.name, read.data)
            except OSError as exc:
                self._warn(f"attempt {attempt}, seat {seat}: the report was not kept: {exc}")
        report, reason = read_coder_report(read.data)
        warning = read.warning or (reason and f"coder report discarded: {reason}")
        if warning:
            self._warn(f"attempt {attempt}, seat {seat}: {warning}")
        return report

    def record_landing(self, kind: EventKind, data: dict[str, Any]) -> None:
        """A landing step, journaled the moment it took effect (recovery reads it back)."""
        if kind == EventKind.LAND_PR_OPENED:
            crash_point(CrashPoint.REF_MOVED)  # opened, nothing recorded yet
        self._record(RunEvent(kind, data))

    def redact_secrets(
        self, plan: RunPlan, outcomes: list[ValidationOutcome]
    ) -> list[ValidationOutcome]:
        """A secret the scan found is replaced by ``[REDACTED:<type>]`` in every file kept for
        the run's seats and judges and in the verdicts, so no later event, halt evidence or
        payload carries it either."""
        if self.redaction.absorb(outcomes):
            for path, exc in self.redaction.redact_folders(self.run_dir(plan)):
                self._warn(f"a detected secret could not be redacted from {path}: {exc}")
        return self.redaction.outcomes(outcomes)

    def redacted_payload(self, payload: Payload) -> Payload:
        """The payload without any secret value the run detected (a coder's report may hold
        one), for the file and for what the CLI prints."""
        if not self.redaction.redactor:
            return payload
        document = payload.to_json()
        redacted = self.redaction.redactor.data(document)
        return payload if redacted == document else Payload.model_validate(redacted)

    def _record(self, event: RunEvent) -> None:
        with self._lock:
            if self.redaction.redactor:  # a ledger event never carries a detected secret
                event = RunEvent(event.kind, self.redaction.redactor.data(event.data))
            self.events.append(event)
            if self.sink is not None:
                self.sink(event)

    def coder_env(self, plan: RunPlan, seat: int, relay: Path | None = None) -> dict[str, str]:
        """The environment the seat's coder runs in: its own credentials and the declared env,
        and ``relay``, the socket of its dispatch's halt relay, where `assay halt check` acts."""
        spec = plan.contract.coder_for_seat(seat)
        env = agent_environment(
            self.operator_env,
            spec.kind.value,
            spec.model_dump(mode="json"),
            declared=plan.contract.env,
        )
        if relay is not None:
            env[RELAY_ENV] = str(relay)
        return with_assay_on_path(env)  # the brief's `assay halt check` must find this assay

    def keep_for_a_look(self, plan: RunPlan) -> None:
        """A run that did not land (or keeps its seats): the last candidate of each seat that
        passed the scope and secret checks is left as its branch in the user's repository."""
        try:
            self.seating.publish_kept(plan)
        except (git.GitError, OSError) as exc:  # the seat goes; the run's logs still tell
            self._warn(f"a seat's candidate was not brought into the repository: {exc}")

    def cleanup(self, plan: RunPlan, *, keep_branches: set[int]) -> None:
        """Remove the run's seats: what stays is a warning (`assay gc` tries again), never a
        fault of the run."""
        for left in self.seating.cleanup(plan, keep_branches=keep_branches):
            self._warn(f"{left} (`assay gc` tries again)")
