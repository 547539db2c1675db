"""The local executor: every Effects call performed in-process, on this machine.

Coders run in threads (each one a child process in its seat's own repository and sandbox,
see :mod:`assay.engine.seating`), so the seats of an attempt run in parallel while the graph
itself stays single-threaded and deterministic.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from assay.adapters import git
from assay.adapters.assay_exe import with_assay_on_path
from assay.adapters.coders import get_coder, ignored_settings
from assay.adapters.coders.base import DispatchRequest, DispatchResult
from assay.adapters.envpolicy import agent_environment, child_environment, model_environment
from assay.adapters.process import EnvironmentFault
from assay.adapters.redact import SecretRedaction
from assay.adapters.report_file import read_report_file
from assay.adapters.run_files import fault_of, make_folder, writing
from assay.adapters.store import halt_files, halt_ops
from assay.adapters.store.halt_journal import HALT_FIRED_EVENT, RELAY_ENV, event_data
from assay.adapters.validators import get_validator
from assay.adapters.validators.base import ValidationContext, ValidationOutcome
from assay.core.anchors import unresolved_anchors
from assay.core.attempts import AttemptRecord
from assay.core.brief import render_brief
from assay.core.changes import ChangeSet
from assay.core.halt_watch import HaltWatch
from assay.core.payload import HaltNotice, Payload
from assay.core.report import CoderReport, compare_with_diff, read_coder_report
from assay.core.results import ValidatorResult
from assay.core.statefile import HaltStateFile
from assay.core.vocab import (
    CanonicalHalt,
    CrashPoint,
    RunStatus,
    ValidatorKind,
)
from assay.engine.crashpoints import crash_point
from assay.engine.effects import JudgeRound, LandOutcome, RunEvent, RunPlan, SeatOutcome
from assay.engine.halt_relay import HaltRelay
from assay.engine.interrupt import boundary
from assay.engine.merge import land_candidate
from assay.engine.panel import judge_blind
from assay.engine.pull_request import PR_OPENED
from assay.engine.seat_results import (
    captured_output,
    environment_failed,
    tampered_outcome,
    with_final_answer,
)
from assay.engine.seating import Seating

EventSink = Callable[[RunEvent], None]


class LocalEffects:
    """Effects for one run on this machine. ``home`` is the repository's ``.assay`` folder."""

    def __init__(
        self,
        *,
        home: Path,
        operator_env: Mapping[str, str],
        sink: EventSink | None = None,
        journaled_firings: Callable[[], Sequence[HaltNotice]] | None = None,
    ) -> None:
        self.home = home
        # The ledger's halt.fired events of this run: firings the state file cannot take back.
        self.journaled_firings = journaled_firings
        self.halt_watch: HaltWatch | None = None
        self.operator_env = dict(operator_env)
        self.sink = sink
        self.events: list[RunEvent] = []
        self.seating = Seating(home, self.operator_env)
        self.warnings: list[str] = []
        # The latest validation of each (attempt, seat): what a merge's commit says of it.
        self.results: dict[tuple[int, int], list[ValidatorResult]] = {}
        # Every secret value the scan found in this run, and what replaces it where it is kept.
        self.redaction = SecretRedaction()
        # Events come from the graph's thread, the threads it hands work to, and the relay's.
        self._lock = threading.RLock()
        self.relay: HaltRelay | None = None
        self.relayed: list[HaltNotice] = []  # firings the halt command sent through the relay
        self._relay_journaled: set[tuple[str, str | None]] = set()

    # -- paths -------------------------------------------------------------------------------

    def run_dir(self, plan: RunPlan) -> Path:
        return self.home / "runs" / plan.run_id

    def state_dir(self) -> Path:
        return self.home / "halt-state"

    # -- effects -----------------------------------------------------------------------------

    async def preflight(self, plan: RunPlan) -> list[str]:
        def read(path: str) -> str | None:
            return git.read_file_at(plan.repo_root, plan.base_commit, path)

        return await asyncio.to_thread(unresolved_anchors, plan.contract.anchors, read)

    async def arm(self, plan: RunPlan) -> None:
        run_dir = self.run_dir(plan)
        run_dir.mkdir(parents=True, exist_ok=True)
        contract_file = run_dir / "contract.json"
        with writing(contract_file):  # a full disk here is the run's environment error
            halt_files.write_json_atomic(contract_file, plan.contract.model_dump(mode="json"))
        document, code = halt_ops.arm(contract_file, plan.dispatch_id, self.state_dir())
        if code != 0:
            raise RuntimeError(f"arming halts failed: {json.dumps(document['violations'])}")
        self.halt_watch = HaltWatch(plan.dispatch_id)
        await asyncio.to_thread(self._watch_halts, plan)  # the armed file: what comes after
        self._open_relay(plan)
        boundary(CrashPoint.ARMED)

    def _open_relay(self, plan: RunPlan) -> None:
        """Listen for the coders' firings (see :mod:`assay.engine.halt_relay`)."""
        if self.relay is not None or self.halt_watch is None:
            return
        relay = HaltRelay(
            dispatch_id=plan.dispatch_id,
            armed=self.halt_watch.severities or {},
            record=self._relayed_firing,
        )
        try:
            relay.start()
        except OSError as exc:  # the file remains the coders' only record of a firing
            self._warn(f"the halt relay could not listen: {exc}")
            return
        self.relay = relay
        self.seating.halt_relay = relay.folder

    def _relayed_firing(self, notice: HaltNotice) -> None:
        """A firing the halt command sent: counted and journaled at once (the relay's thread)."""
        key = (notice.name, notice.fired_at)
        with self._lock:
            if key in self._relay_journaled:
                return
            if all((n.name, n.fired_at) != key for n in self.relayed):
                self.relayed.append(notice)  # counted even if the journal write fails
            self._record(RunEvent(HALT_FIRED_EVENT, event_data(notice, by="halt check")))
            self._relay_journaled.add(key)

    def close(self) -> None:
        """The run is over: stop the relay and remove its socket (idempotent)."""
        relay, self.relay = self.relay, None
        if relay is not None:
            relay.close()
        self.seating.halt_relay = None

    async def dispatch(self, plan: RunPlan, attempt: int, seat: int, prompt: str) -> SeatOutcome:
        spec = plan.contract.coder_for_seat(seat)
        repo = await asyncio.to_thread(self.seating.prepare, plan, seat)
        worktree = repo.path
        boundary(CrashPoint.DISPATCH_STARTED)
        seat_dir = self.run_dir(plan) / f"attempt-{attempt}" / f"seat-{seat}"
        try:
            make_folder(seat_dir)
        except EnvironmentFault as exc:  # no folder for the seat: its environment error
            unmade: EnvironmentFault | None = exc
        else:
            unmade = None
        report_path = seat_dir / "report.json"
        report_folder = seat_dir.resolve()
        with contextlib.suppress(OSError):  # whatever is there, the coder's report is read fresh
            report_path.unlink(missing_ok=True)
        request = DispatchRequest(
            worktree=worktree,
            prompt=prompt,
            dispatch_id=plan.dispatch_id,
            attempt=attempt,
            seat=seat,
            halt_state_dir=self.state_dir(),
            report_path=report_path,
            log_dir=seat_dir,
            env=self._coder_env(plan, seat),
            settings=spec.model_dump(mode="json"),
            timeout_seconds=spec.timeout_seconds,
            max_turns=spec.max_turns,
            repo_root=plan.repo_root,
            validator_commands={
                v.id: v.run
                for v in plan.contract.validators
                if v.kind is ValidatorKind.COMMAND and v.run
            },
            brief=render_brief(plan.contract, spec.kind),
            sandbox=self.seating.coder_sandbox(plan, seat, seat_dir),
            home=repo.home.resolve(),
        )
        coder = None
        if unmade is not None:
            result = environment_failed(unmade)
        else:
            try:
                coder = get_coder(spec.kind.value)
            except Exception as exc:  # an unknown or broken adapter: this seat's environment error
                result = DispatchResult(exit_code=None, environment_error=str(exc))
        if coder is not None:
            for setting in ignored_settings(spec, coder):
                self._warn(f"seat {seat}: the {spec.kind.value} coder ignores `{setting}`")
            try:
                result = await asyncio.to_thread(coder.dispatch, request)
            except EnvironmentFault as exc:  # the machine failed the coder: refunded, named
                result = environment_failed(exc)
            except OSError as exc:  # assay's own write for the seat (its prompt, its transcript)
                fault = fault_of(exc, seat_dir)
                if fault is None:
                    raise
                result = environment_failed(fault)
        # Before any git command of assay's there: the seat's .git as assay left it.
        tampered = await asyncio.to_thread(self.seating.secure, seat)
        if tampered is not None:  # reaching past the seat through its .git: a scope breach
            self._warn(f"attempt {attempt}, seat {seat}: {tampered}")
            result.error = "; ".join(filter(None, [result.error, tampered]))
            await self.fire(plan, CanonicalHalt.SCOPE_BREACH, f"seat {seat}: {tampered}")
            change = ChangeSet(base_commit=plan.base_commit, files=[], diff="")
        else:
            change = await asyncio.to_thread(git.read_changes, worktree, plan.base_commit)
            # A checkpoint commit fixes the candidate, so validators' side effects can be undone.
            message = f"assay: attempt {attempt}, seat {seat}"
            await asyncio.to_thread(git.commit_all, worktree, message)
            await asyncio.to_thread(self.seating.record_candidate, plan, attempt, seat)
        boundary(CrashPoint.DISPATCH_ENDED)
        report = with_final_answer(
            self._read_report(attempt, seat, report_path, report_folder), result.report
        )
        return SeatOutcome(
            seat=seat,
            attempt=attempt,
            coder=spec.kind.value,
            result=result,
            change=change,
            worktree=worktree,
            report=report,
            comparison=compare_with_diff(report, change.paths)
            if report
            else compare_with_diff(None, []),
        )

    async def validate(self, plan: RunPlan, seat: SeatOutcome) -> list[ValidationOutcome]:
        contract = plan.contract
        env = child_environment(self.operator_env, declared=contract.env)
        log_dir = (
            self.run_dir(plan) / f"attempt-{seat.attempt}" / f"seat-{seat.seat}" / "validators"
        )
        make_folder(log_dir)  # EnvironmentFault: the attempt's environment error, refunded
        captured = captured_output(seat.result)
        checks: list[tuple[str, Mapping[str, object]]] = [
            ("scope", {"id": "scope", **contract.scope.model_dump(mode="json")}),
            ("secrets", {"id": "secrets", "mode": contract.secrets.value}),
        ]
        checks += [(v.kind.value, v.model_dump(mode="json")) for v in contract.validators]
        coder_ignored = await asyncio.to_thread(git.ignored_entries, seat.worktree)
        outcomes: list[ValidationOutcome] = []
        # The secret scan also looks for the exact values of the coder's own credentials
        # (for the llm coder, the key assay read for it, which its commands never saw).
        spec = plan.contract.coder_for_seat(seat.seat)
        coder_env = model_environment(
            self.operator_env,
            spec.kind.value,
            spec.model_dump(mode="json"),
            declared=contract.env,
        )
        sandbox = self.seating.validator_sandbox(plan, seat.seat, log_dir)
        for kind, settings in checks:
            context = ValidationContext(
                worktree=seat.worktree,
                change=seat.change,
                task=contract.task,
                env=coder_env if kind == "secrets" else env,
                settings=settings,
                log_dir=log_dir,
                captured_output=captured,
                sandbox=sandbox,
            )
            validator = get_validator(kind)
            outcome = await asyncio.to_thread(validator.validate, context)
            outcomes.append(outcome)
            await self.emit(
                RunEvent(
                    "validator.finished",
                    {
                        "attempt": seat.attempt,
                        "seat": seat.seat,
                        "validator": outcome.result.validator_id,
                        "severity": outcome.result.severity.value,
                        "error": outcome.result.error,
                    },
                )
            )
        # The validators ran the coder's code in the seat: its .git is checked again.
        tampered = await asyncio.to_thread(self.seating.secure, seat.seat)
        if tampered is not None:
            self._warn(f"attempt {seat.attempt}, seat {seat.seat}: {tampered}")
            outcomes.append(tampered_outcome(tampered))
        else:
            await asyncio.to_thread(git.restore_checkpoint, seat.worktree, coder_ignored)
        outcomes = await asyncio.to_thread(self._redact_secrets, plan, outcomes)
        self.results.setdefault((seat.attempt, seat.seat), [o.result for o in outcomes])
        self.seating.record_checks(seat.attempt, seat.seat, [o.result for o in outcomes])
        boundary(CrashPoint.VALIDATED)
        return outcomes

    async def judge(self, plan: RunPlan, attempt: int, seats: list[SeatOutcome]) -> JudgeRound:
        workdir = self.run_dir(plan) / f"attempt-{attempt}" / "judges"
        panel = await judge_blind(
            plan,
            attempt,
            seats,
            operator_env=self.operator_env,
            workdir=workdir,
            sandbox=await asyncio.to_thread(self.seating.judge_sandbox, plan, workdir),
        )
        for problem in panel.problems:  # a judge that cannot run says so on stderr
            self._warn(f"attempt {attempt}: {problem}")
        boundary(CrashPoint.JUDGED)
        return panel

    async def fire(self, plan: RunPlan, halt: CanonicalHalt, evidence: str) -> None:
        # A refusal (already FIRED and sticky) leaves the earlier firing, which is what counts.
        await asyncio.to_thread(
            halt_ops.check,
            plan.dispatch_id,
            halt.value,
            self.state_dir(),
            fire=True,
            evidence=evidence,
        )
        self._watch_halts(plan)  # journal the engine's own firing at once

    async def fired_halts(self, plan: RunPlan) -> list[HaltNotice]:
        """Every firing seen in the run (the file's and the ledger's journal), and, when the
        file was removed or went backwards while the coder ran, that tampering as a block."""
        return self._watch_halts(plan)

    def _watch_halts(self, plan: RunPlan) -> list[HaltNotice]:
        if self.halt_watch is None:  # not armed (a test driving effects directly)
            self.halt_watch = HaltWatch(plan.dispatch_id)
        watch = self.halt_watch
        path = halt_files.state_path(self.state_dir(), plan.dispatch_id)
        state: HaltStateFile | None = None
        problem = None
        try:
            state = halt_files.read_state(path)
        except halt_files.StateFileError as exc:
            problem = "it was removed" if not path.exists() else f"it cannot be read: {exc}"
        journaled = list(self.journaled_firings()) if self.journaled_firings else []
        recorded = {(n.name, n.fired_at) for n in journaled}
        with self._lock:  # what the relay took counts, journaled already or not
            journaled += self.relayed
            recorded |= self._relay_journaled
        for notice in watch.observe(state, problem, journaled):
            if (notice.name, notice.fired_at) not in recorded:
                self._record(RunEvent(HALT_FIRED_EVENT, event_data(notice, by="engine")))
        return watch.fired()

    async def land(
        self,
        plan: RunPlan,
        seat: SeatOutcome,
        *,
        blocked: bool = False,
        failures: Sequence[str] = (),
        attempts: Sequence[AttemptRecord] = (),
    ) -> LandOutcome:
        boundary(CrashPoint.LANDING_INTENT)
        outcome = await asyncio.to_thread(
            land_candidate, self, plan, seat, blocked, failures, attempts
        )
        if outcome.status is RunStatus.MERGED:
            crash_point(CrashPoint.REF_MOVED)  # landed, nothing recorded yet: never interrupted
        return outcome

    async def emit(self, event: RunEvent) -> None:
        self._record(event)

    # -- helpers -----------------------------------------------------------------------------

    def warn(self, message: str) -> None:
        """A run warning, once per message: in the payload, the ledger's events and on the
        live display (stderr)."""
        self._warn(message)

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)
            self._record(RunEvent("run.warning", {"message": message}))

    def _read_report(self, attempt: int, seat: int, path: Path, folder: Path) -> CoderReport | None:
        """The coder's report file, read safely; any problem is one run warning, never a fault."""
        read = read_report_file(path, folder)
        report, reason = read_coder_report(read.data)
        warning = read.warning or (reason and f"coder report discarded: {reason}")
        if warning:
            self._warn(f"attempt {attempt}, seat {seat}: {warning}")
        return report

    def record_landing(self, kind: str, data: dict[str, Any]) -> None:
        """A landing step, journaled the moment it took effect (recovery reads it back)."""
        if kind == PR_OPENED:
            crash_point(CrashPoint.REF_MOVED)  # opened, nothing recorded yet
        self._record(RunEvent(kind, data))

    def _redact_secrets(
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

    def _coder_env(self, plan: RunPlan, seat: int) -> dict[str, str]:
        """The environment the seat's coder runs in: its own credentials and the declared env."""
        spec = plan.contract.coder_for_seat(seat)
        env = agent_environment(
            self.operator_env,
            spec.kind.value,
            spec.model_dump(mode="json"),
            declared=plan.contract.env,
        )
        if self.relay is not None and self.relay.path is not None:
            env[RELAY_ENV] = str(self.relay.path)  # where `assay halt check --fire` reports
        return with_assay_on_path(env)  # the brief's `assay halt check` must find this assay

    def keep_for_a_look(self, plan: RunPlan) -> None:
        """A run that did not land (or keeps its seats): the last candidate of each seat that
        passed the scope and secret checks is left as its branch in the user's repository."""
        try:
            self.seating.publish_kept(plan)
        except (git.GitError, OSError) as exc:  # the seat goes; the run's logs still tell
            self._warn(f"a seat's candidate was not brought into the repository: {exc}")

    def cleanup(self, plan: RunPlan, *, keep_branches: set[int]) -> None:
        self.seating.cleanup(plan, keep_branches=keep_branches)
