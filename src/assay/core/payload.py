"""The halt payload: one JSON object per run accounting for everything that happened in it.

Schema id ``assay.payload/1``. The JSON Schema generated from :class:`Payload` is committed at
``schemas/payload.schema.json``; ``assay payload schema`` prints it. Every summary in here is
derived from records passed in (attempt records, results, reports), never journaled twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from assay.core.attempts import AttemptRecord, AttemptsSummary, summarize_attempts
from assay.core.changes import TypeChange
from assay.core.policy import PolicyDecision
from assay.core.report import CoderReport, DiffComparison, FileChange
from assay.core.results import ValidatorResult
from assay.core.tally import Tally
from assay.core.usage import Spend
from assay.core.vocab import (
    HaltSeverity,
    HaltType,
    LandMode,
    NetworkMode,
    RunStatus,
    SandboxMode,
    StopReason,
    TaskStatus,
)

PAYLOAD_SCHEMA_ID: Final = "assay.payload/1"


class _Persisted(BaseModel):
    # Payloads are read back by other tools and later versions: ignore keys we do not know.
    model_config = ConfigDict(extra="ignore", frozen=True)


class CandidateSummary(_Persisted):
    """One seat's candidate: who wrote it (never shown to judges), what it touched, its fate."""

    seat: int = Field(ge=1)
    label: str | None = Field(default=None, description="blind label shown to judges (A, B, …)")
    coder: str
    files_changed: list[str] = Field(default_factory=list)
    type_changes: list[TypeChange] = Field(
        default_factory=list,
        description="each path whose entry type the change alters (a symlink replaced by a "
        "regular copy, an executable bit flipped), read from git's modes",
    )
    ignored_files: list[str] = Field(
        default_factory=list,
        description="files and folders the coder wrote that the repository's .gitignore files "
        "keep out of the candidate (the first 50): not validated, not landed",
    )
    ignored_count: int = Field(default=0, ge=0, description="how many such entries in all")
    viable: bool
    lost_to_quota: bool = False
    lost_to_provider_fault: bool = False
    fault: str | None = Field(
        default=None,
        description=(
            "what the seat was lost to: the quota, provider or environment, or a setting "
            "this machine cannot run (a program, a key)"
        ),
    )
    stop_reason: StopReason | None = None


class PayloadCoderReport(_Persisted):
    """The chosen candidate's coder report, marked as evidence that decides nothing."""

    source: Literal["coder"] = "coder"
    evidence_only: Literal[True] = True
    files: list[FileChange] | None = None
    summary: str | None = None
    turns_used: int | None = None
    turns_available: int | None = None
    tokens_used: int | None = None
    context_window: int | None = None
    wall_time_ms: int | None = None
    cost_usd: float | None = None
    stop_reason: StopReason | None = None
    claimed_but_missing: list[str] = Field(default_factory=list)
    unclaimed_but_present: list[str] = Field(default_factory=list)


class HaltNotice(_Persisted):
    """A halt that fired during the run, with its evidence."""

    name: str
    severity: HaltSeverity
    detail: str = ""
    fired_at: str | None = None


class PayloadHalts(_Persisted):
    fired: list[HaltNotice] = Field(default_factory=list, description="block halts that fired")
    warnings: list[HaltNotice] = Field(
        default_factory=list, description="warn and log halts that fired"
    )


class Usage(_Persisted):
    """What the run's dispatches spent, summed from the usage journal (every report as it
    arrived, so a killed run counts too). A cost nobody reported is unknown, never zero."""

    tokens: int = Field(default=0, ge=0)
    tokens_in: int = Field(default=0, ge=0)
    tokens_out: int = Field(default=0, ge=0)
    cost_usd: float | None = Field(
        default=0.0,
        ge=0,
        description="the total; null when any dispatch's cost is unknown (unpriced or "
        "unreported dispatches)",
    )
    priced_cost_usd: float = Field(
        default=0.0, ge=0, description="the sum of the costs that are known (a lower bound)"
    )
    dispatches: int = Field(default=0, ge=0, description="dispatches that spent (judges too)")
    unpriced_dispatches: int = Field(
        default=0, ge=0, description="dispatches whose program reported tokens but no cost"
    )
    unreported_dispatches: int = Field(
        default=0, ge=0, description="dispatches whose program reported no usage at all"
    )
    wall_time_ms: int = Field(default=0, ge=0)


def usage_of(spend: Spend, wall_time_ms: int) -> Usage:
    """The payload's usage from the journal's sum."""
    return Usage(
        tokens=spend.tokens,
        tokens_in=spend.tokens_in,
        tokens_out=spend.tokens_out,
        cost_usd=spend.cost_usd,
        priced_cost_usd=round(spend.priced_cost_usd, 6),
        dispatches=spend.dispatches,
        unpriced_dispatches=spend.unpriced,
        unreported_dispatches=spend.unreported,
        wall_time_ms=wall_time_ms,
    )


class LandSummary(_Persisted):
    """What landing left: the contract's mode, the branch, and the pull request if one opened."""

    mode: LandMode
    branch: str | None = None
    pr_url: str | None = Field(default=None, description="the pull request a human reviews")


class Payload(_Persisted):
    """Everything a reader needs to tell a clean pass from a hard-won one, and why a run stopped."""

    schema_id: Literal["assay.payload/1"] = Field(default=PAYLOAD_SCHEMA_ID, alias="schema")
    task_id: str
    run_id: str
    dispatch_id: str
    status: RunStatus
    halt_type: HaltType
    reason: str
    task_status: TaskStatus
    attempt_spent: bool
    task_spec: str
    validator_results: list[ValidatorResult] = Field(default_factory=list)
    policy_decision: PolicyDecision | None = None
    attempts: AttemptsSummary
    candidates: list[CandidateSummary] = Field(default_factory=list)
    tally: Tally | None = None
    coder_report: PayloadCoderReport | None = None
    halts: PayloadHalts = Field(default_factory=PayloadHalts)
    usage: Usage = Field(default_factory=Usage)
    land: LandSummary | None = Field(default=None, description="null when nothing was landed")
    sandbox: SandboxMode = Field(
        default=SandboxMode.NONE,
        description="how the seats' processes were confined: bwrap, or none (unconfined)",
    )
    network: NetworkMode = Field(
        default=NetworkMode.HOST,
        description="the seats' network: on (a namespace of their own, out only through an "
        "allowlisting proxy), none, or host (this machine's network, loopback included)",
    )
    started_at: AwareDatetime
    finished_at: AwareDatetime

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        """The JSON document: ``schema`` first, ``attempts.omitted`` only when history was cut."""
        data = self.model_dump(mode="json", by_alias=True)
        data["attempts"] = self.attempts.to_json()
        return data


def payload_coder_report(
    report: CoderReport | None, comparison: DiffComparison
) -> PayloadCoderReport | None:
    """The payload form of a report; ``None`` when the coder left none (or a garbled one)."""
    if report is None:
        return None
    return PayloadCoderReport(
        **report.model_dump(),
        claimed_but_missing=comparison.claimed_but_missing,
        unclaimed_but_present=comparison.unclaimed_but_present,
    )


def build_payload(
    *,
    task_id: str,
    run_id: str,
    dispatch_id: str,
    status: RunStatus,
    halt_type: HaltType,
    reason: str,
    task_status: TaskStatus,
    attempt_spent: bool,
    task_spec: str,
    attempts: Sequence[AttemptRecord],
    started_at: AwareDatetime,
    finished_at: AwareDatetime,
    validator_results: Sequence[ValidatorResult] = (),
    policy_decision: PolicyDecision | None = None,
    candidates: Sequence[CandidateSummary] = (),
    tally: Tally | None = None,
    coder_report: CoderReport | None = None,
    report_comparison: DiffComparison | None = None,
    fired_halts: Sequence[HaltNotice] = (),
    usage: Usage | None = None,
    land: LandSummary | None = None,
    sandbox: SandboxMode = SandboxMode.NONE,
    network: NetworkMode = NetworkMode.HOST,
) -> Payload:
    """Assemble a run's payload; a non-terminal status is refused (it is a bug, not a result)."""
    if not status.terminal:
        raise ValueError(f"a payload needs a terminal run status, not {status.value}")
    if finished_at < started_at:
        raise ValueError("finished_at is before started_at")
    comparison = report_comparison or DiffComparison()
    return Payload(
        task_id=task_id,
        run_id=run_id,
        dispatch_id=dispatch_id,
        status=status,
        halt_type=halt_type,
        reason=reason,
        task_status=task_status,
        attempt_spent=attempt_spent,
        task_spec=task_spec,
        validator_results=list(validator_results),
        policy_decision=policy_decision,
        attempts=summarize_attempts(attempts),
        candidates=list(candidates),
        tally=tally,
        coder_report=payload_coder_report(coder_report, comparison),
        halts=PayloadHalts(
            fired=[h for h in fired_halts if h.severity is HaltSeverity.BLOCK],
            warnings=[h for h in fired_halts if h.severity is not HaltSeverity.BLOCK],
        ),
        usage=usage or Usage(),
        land=land,
        sandbox=sandbox,
        network=NetworkMode.HOST if sandbox is SandboxMode.NONE else network,
        started_at=started_at,
        finished_at=finished_at,
    )


def payload_json_schema() -> dict[str, Any]:
    """The JSON Schema of the payload document (serialisation mode, by alias)."""
    schema = Payload.model_json_schema(mode="serialization", by_alias=True)
    schema["$id"] = "https://assay.dev/schemas/payload.schema.json"
    schema["title"] = f"assay halt payload ({PAYLOAD_SCHEMA_ID})"
    return schema
