"""A run's site on this worker: what the local executor keeps of one run (its seats, each
candidate's diff, the validated trees, the secrets found), as the modules that perform its
effects (:mod:`~assay.engine.local.close`, :mod:`~assay.engine.local.seats`,
:mod:`~assay.engine.local.merge`) see it. :class:`~assay.engine.local.executor.LocalEffects`
is the one site; the helpers name this protocol, not the executor, so the executor imports
them and they never import it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from assay.adapters.coders.base import DispatchResult
from assay.adapters.redact import SecretRedaction
from assay.adapters.store.sql import Ledger
from assay.adapters.validators.base import ValidationOutcome
from assay.core.changes import ChangeSet
from assay.core.contract import Contract
from assay.core.payload import Payload
from assay.core.report import CoderReport
from assay.core.results import ValidatorResult
from assay.core.tasks import Task
from assay.core.vocab import EventKind
from assay.engine.effects import FireCall
from assay.engine.local.halts import HaltKeeper
from assay.engine.local.metering import RunMeter
from assay.engine.local.seating import Seating
from assay.engine.values import Candidate, RunEvent, RunPlan

Clock = Callable[[], datetime]


@dataclass(frozen=True)
class SeatWork:
    """What one dispatch left on this worker: the coder's result (its log too), the change
    with its diff, and the candidate's commit in the seat's candidate store (None: the seat
    left no candidate)."""

    result: DispatchResult
    change: ChangeSet
    commit: str | None


class RunSite(Protocol):
    """One open run on this worker."""

    repo: Path
    home: Path
    ledger: Ledger
    task: Task
    contract: Contract
    clock: Clock
    started_at: datetime | None
    operator_env: dict[str, str]
    origin: str | None  # the remote runs start from and land on; None: this repository
    plan: RunPlan | None
    run_lock: int | None  # the run folder's lock, held while the run lives
    keep_worktrees: bool
    warnings: list[str]
    seating: Seating
    halts: HaltKeeper
    redaction: SecretRedaction
    # What each dispatch left here, by (attempt, seat).
    work: dict[tuple[int, int], SeatWork]
    # The latest validation of each (attempt, seat): what a merge's commit says of it.
    results: dict[tuple[int, int], list[ValidatorResult]]
    # Every tree the checks ran on: the only trees a landing may put on the base branch.
    validated: set[str]

    def run_dir(self, plan: RunPlan) -> Path: ...

    def state_dir(self) -> Path: ...

    def meter(self, plan: RunPlan) -> RunMeter: ...

    def warn(self, message: str) -> None: ...

    async def emit(self, event: RunEvent) -> None: ...

    async def fire(self, call: FireCall) -> None: ...

    async def validate_candidate(
        self,
        plan: RunPlan,
        candidate: Candidate,
        change: ChangeSet | None = None,
        commit: str | None = None,
    ) -> list[ValidationOutcome]: ...

    def coder_env(self, plan: RunPlan, seat: int, relay: Path | None = None) -> dict[str, str]: ...

    def read_report(
        self, attempt: int, seat: int, path: Path, folder: Path, keep: Path | None = None
    ) -> CoderReport | None: ...

    def record_landing(self, kind: EventKind, data: dict[str, Any]) -> None: ...

    def redact_secrets(
        self, plan: RunPlan, outcomes: list[ValidationOutcome]
    ) -> list[ValidationOutcome]: ...

    def redacted_payload(self, payload: Payload) -> Payload: ...

    def keep_for_a_look(self, plan: RunPlan) -> None: ...

    def cleanup(self, plan: RunPlan, *, keep_branches: set[int]) -> None: ...
