"""What a run came to: the record the executor closes the run with (settle, payload, ledger)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from assay.core.attempts import AttemptRecord
from assay.core.payload import HaltNotice
from assay.core.policy import PolicyDecision
from assay.core.results import ValidatorResult
from assay.core.settle import Verdict
from assay.core.tally import Tally
from assay.core.vocab import HaltType, RunStatus
from assay.engine.values import Candidate, LandOutcome


@dataclass
class RunResult:
    """Everything the executor needs to close the run: settle, payload, ledger."""

    status: RunStatus
    halt_type: HaltType
    reason: str
    attempts: list[AttemptRecord] = field(default_factory=list)
    dispatches: list[Candidate] = field(default_factory=list)
    validator_results: list[ValidatorResult] = field(default_factory=list)
    policy_decision: PolicyDecision | None = None
    winner: Candidate | None = None
    fired: list[HaltNotice] = field(default_factory=list)
    land: LandOutcome | None = None
    quota_hit: bool = False
    quota_reset_at: datetime | None = None
    no_viable_candidates: bool = False
    machine_fault: bool = False  # ended on a provider, environment or landing fault: refunded
    land_refused: bool = False  # the landing was refused (401, 403, a setting): a human decides
    halted: bool = False
    unrunnable: bool = False  # a program or key the operator sets is missing here: held
    parked: bool = False  # stopped at a boundary (interrupted, its process or worker lost)
    recovery_waves: int = 0
    validations: int = 0
    judge_calls: int = 0
    tally: Tally | None = None
    labels: dict[int, str] = field(default_factory=dict)
    # The graph broke (an effect fault, a bug): what ran is counted from the run's journal,
    # which saw every dispatch start, not from ``dispatches``.
    journaled: bool = False
    trace: str | None = None  # the traceback of a bug that ended the run, kept with its logs

    @property
    def verdict(self) -> Verdict:
        return Verdict(
            status=self.status,
            left_pr=self.land.left_pr if self.land else False,
            quota_hit=self.quota_hit,
            parked=self.parked,
            no_viable_candidates=self.no_viable_candidates,
            machine_fault=self.machine_fault,
            land_refused=self.land_refused,
            halted=self.halted,
            unrunnable=self.unrunnable,
        )

    @property
    def latest_seats(self) -> list[Candidate]:
        """The newest dispatch of each seat, in seat order."""
        latest: dict[int, Candidate] = {}
        for outcome in self.dispatches:
            latest[outcome.seat] = outcome
        return [latest[seat] for seat in sorted(latest)]

    @property
    def wall_time_ms(self) -> int:
        """The dispatches' wall time, summed."""
        return sum(d.dispatch.wall_time_ms for d in self.dispatches)
