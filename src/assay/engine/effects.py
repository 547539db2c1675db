"""The Effects interface: every side effect of a run, as the graph sees it.

The graph (:mod:`assay.engine.graph`) decides; effects act. The local executor performs each
call in-process; the Temporal executor performs each as an activity. Keeping every step behind
this interface is what lets the graph be deterministic and tested without git or a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

from pydantic import JsonValue

from assay.adapters.coders.base import DispatchResult
from assay.adapters.validators.base import ValidationOutcome
from assay.core.attempts import AttemptRecord
from assay.core.changes import ChangeSet
from assay.core.contract import Contract
from assay.core.payload import HaltNotice
from assay.core.report import CoderReport, DiffComparison
from assay.core.tally import Tally
from assay.core.vocab import CanonicalHalt, RunStatus


@dataclass(frozen=True)
class RunPlan:
    """What a run is about; fixed before the graph starts."""

    task_id: str
    run_id: str
    dispatch_id: str
    contract: Contract
    repo_root: Path
    base_commit: str
    base_branch: str | None


@dataclass
class SeatOutcome:
    """One seat's dispatch in one attempt, read back from disk."""

    seat: int
    attempt: int
    coder: str
    result: DispatchResult
    change: ChangeSet
    worktree: Path
    report: CoderReport | None = None
    comparison: DiffComparison = field(default_factory=DiffComparison)

    @property
    def lost_to_quota(self) -> bool:
        return self.result.quota is not None

    @property
    def lost_to_provider_fault(self) -> bool:
        """The provider failed the coder (not quota): a machine fact, never a task failure."""
        return self.result.fault is not None and not self.lost_to_quota

    @property
    def environment_error(self) -> str | None:
        return self.result.environment_error

    @property
    def lost_to_machine(self) -> bool:
        """Lost to quota, a provider fault or the environment: nothing said about the task."""
        environment = self.environment_error is not None
        return self.lost_to_quota or self.lost_to_provider_fault or environment

    @property
    def viable(self) -> bool:
        """A candidate the validators can judge: it ran, was not lost, and changed something."""
        return not self.lost_to_machine and not self.change.empty


@dataclass(frozen=True)
class LandOutcome:
    status: RunStatus  # merged or ready; blocked when a blocked run left its branch or PR
    detail: str
    branch: str | None = None
    left_pr: bool = False
    pr_url: str | None = None
    validations: int = 0  # validations of a combined tree, when the base branch had moved
    # The landing failed on the machine (GitHub 5xx, a timeout, the network): land again later.
    machine_fault: bool = False
    # The landing was refused (401, 403, a setting missing): a human must resolve it.
    refused: bool = False


@dataclass(frozen=True)
class JudgeRound:
    """What the blind judges of one attempt said, tallied."""

    tally: Tally
    labels: dict[int, str]  # seat -> blind label
    calls: int  # rank and deliberation calls made
    lost_to_quota: int = 0  # judges whose provider refused them
    quota_reset_at: datetime | None = None
    lost_to_fault: int = 0  # judges whose provider failed after retries (5xx, 529, connection)
    # Judges that gave no usable ranking, each named with why ("judge 1 (llm gpt-5-mini): …").
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunEvent:
    """Progress, for the live display and the ledger's event log (stored as it is: JSON)."""

    kind: str
    data: dict[str, JsonValue] = field(default_factory=dict)


class Effects(Protocol):
    async def preflight(self, plan: RunPlan) -> list[str]:
        """Anchors of the contract that do not resolve at the base commit."""
        ...

    async def arm(self, plan: RunPlan) -> None: ...

    async def dispatch(
        self, plan: RunPlan, attempt: int, seat: int, prompt: str
    ) -> SeatOutcome: ...

    async def validate(self, plan: RunPlan, seat: SeatOutcome) -> list[ValidationOutcome]: ...

    async def judge(self, plan: RunPlan, attempt: int, seats: list[SeatOutcome]) -> JudgeRound:
        """Blind judges rank the candidates of ``seats`` (two or more)."""
        ...

    async def fire(self, plan: RunPlan, halt: CanonicalHalt, evidence: str) -> None: ...

    async def fired_halts(self, plan: RunPlan) -> list[HaltNotice]: ...

    async def land(
        self,
        plan: RunPlan,
        seat: SeatOutcome,
        *,
        blocked: bool = False,
        failures: Sequence[str] = (),
        attempts: Sequence[AttemptRecord] = (),
    ) -> LandOutcome:
        """Land the chosen candidate by the contract's mode. ``blocked``: the validators still
        fail and the mode is ``pr``; leave it as a draft PR listing ``failures`` for a human.
        ``attempts``: the run's attempts so far (a merge's commit counts them)."""
        ...

    async def emit(self, event: RunEvent) -> None: ...
