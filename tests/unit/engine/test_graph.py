"""run_graph against scripted effects: the decisions, without git, coders or models."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest

from assay.adapters.coders.base import DispatchResult, ProviderFault
from assay.adapters.validators.base import ValidationOutcome
from assay.core.changes import ChangeSet, FileDelta
from assay.core.contract import Budgets, Contract, ValidatorSpec
from assay.core.payload import HaltNotice
from assay.core.quota import Quota
from assay.core.results import ValidatorResult
from assay.core.settle import Settlement, settle_row
from assay.core.tally import tally
from assay.core.tasks import Task
from assay.core.vocab import (
    AttemptOutcome,
    CanonicalHalt,
    FileChangeKind,
    HaltSeverity,
    HaltType,
    RunStatus,
    SettleRow,
    Severity,
    StopReason,
    TaskStatus,
)
from assay.engine.effects import (
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
    RunStopped,
    SeatCall,
    Validation,
)
from assay.engine.graph.run import run_attempts as run_graph
from assay.engine.graph.run import run_graph as run_whole
from assay.engine.local.to_values import candidate_of, validation_of
from assay.engine.run_result import RunResult


def change(*paths: str) -> ChangeSet:
    return ChangeSet(
        base_commit="base",
        files=[FileDelta(path=p, kind=FileChangeKind.MODIFIED) for p in paths],
    )


def result(severity: Severity, *findings: str, error: bool = False) -> ValidatorResult:
    return ValidatorResult(
        validator_id="tests", severity=severity, findings=list(findings), error=error
    )


@dataclass
class Script:
    """Per attempt: what each seat's coder does and what the validators say."""

    dispatches: list[list[DispatchResult | ChangeSet]] = field(default_factory=list)
    verdicts: list[list[ValidatorResult]] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    coder_fires: dict[int, tuple[CanonicalHalt, HaltSeverity]] = field(default_factory=dict)


class FakeEffects:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.prompts: list[str] = []
        self.fired: list[HaltNotice] = []
        self.landed: list[int] = []
        self.blocked_lands: list[list[str]] = []
        self.events: list[RunEvent] = []

    async def preflight(self, plan: RunPlan) -> list[str]:
        return self.script.unresolved

    async def arm(self, plan: RunPlan) -> None:
        return None

    async def dispatch(self, call: SeatCall) -> Candidate:
        attempt, seat, prompt = call.attempt, call.seat, call.prompt
        self.prompts.append(prompt)
        if attempt in self.script.coder_fires:
            halt, severity = self.script.coder_fires[attempt]
            self.fired.append(HaltNotice(name=halt.value, severity=severity, detail="coder says"))
        step = self.script.dispatches[min(attempt, len(self.script.dispatches)) - 1][seat - 1]
        if isinstance(step, ChangeSet):
            res, changed = DispatchResult(exit_code=0), step
        else:
            res, changed = step, ChangeSet(base_commit="base")
        return candidate_of(seat=seat, attempt=attempt, coder="fake", result=res, change=changed)

    async def validate(self, call: CandidateCall) -> list[Validation]:
        seat = call.candidate
        verdicts = self.script.verdicts[min(seat.attempt, len(self.script.verdicts)) - 1]
        return [Validation(result=r) for r in verdicts]

    async def fire(self, call: FireCall) -> None:
        halt, evidence = call.halt, call.evidence
        severity = HaltSeverity.BLOCK
        if halt in (CanonicalHalt.BUDGET_EXHAUSTED, CanonicalHalt.VERIFICATION_GAP):
            severity = HaltSeverity.WARN
        self.fired.append(HaltNotice(name=halt.value, severity=severity, detail=evidence))

    async def fired_halts(self, plan: RunPlan) -> list[HaltNotice]:
        return list(self.fired)

    async def land(self, call: LandCall) -> LandOutcome:
        seat, blocked, failures = call.candidate, call.blocked, call.failures
        self.landed.append(seat.seat)
        if blocked:
            self.blocked_lands.append(list(failures))
            url = "https://github.example/o/r/pull/1"
            return LandOutcome(RunStatus.BLOCKED, "draft PR", "assay/x", left_pr=True, pr_url=url)
        return LandOutcome(RunStatus.MERGED, "merged into main", "assay/x")

    async def emit(self, event: RunEvent) -> None:
        self.events.append(event)


def plan(**contract: object) -> RunPlan:
    settings: dict[str, object] = {
        "task": "Fix slugify.",
        "budgets": Budgets(max_recovery=2),
        "validators": [ValidatorSpec(id="tests", run="pytest -q")],
    }
    settings.update(contract)
    return RunPlan(
        task_id="t1",
        run_id="r1",
        dispatch_id="r1",
        contract=Contract(**settings),  # type: ignore[arg-type]
        repo_root=Path("."),
        base_commit="base",
        base_branch="main",
    )


def run(script: Script, **contract: object) -> tuple[FakeEffects, object]:
    fx = FakeEffects(script)
    return fx, asyncio.run(run_graph(plan(**contract), fx))


def test_clean_pass_lands_after_one_attempt() -> None:
    fx, out = run(Script(dispatches=[[change("a.py")]], verdicts=[[result(Severity.PASS)]]))
    assert out.status is RunStatus.MERGED and out.halt_type is HaltType.NONE
    assert [a.outcome for a in out.attempts] == [AttemptOutcome.PASSED]
    assert fx.landed == [1]


def test_blocked_attempt_recovers_with_the_failure_in_the_spec() -> None:
    fx, out = run(
        Script(
            dispatches=[[change("a.py")], [change("a.py")]],
            verdicts=[[result(Severity.BLOCK, "FAILED test_digits")], [result(Severity.PASS)]],
        )
    )
    assert out.status is RunStatus.MERGED
    assert [a.outcome for a in out.attempts] == [AttemptOutcome.BLOCKED, AttemptOutcome.PASSED]
    assert fx.prompts[0] == "Fix slugify."
    assert "[attempt 1] tests:" in fx.prompts[1] and "FAILED test_digits" in fx.prompts[1]
    assert out.recovery_waves == 1


def test_same_findings_twice_is_stuck() -> None:
    _, out = run(
        Script(
            dispatches=[[change("a.py")]],
            verdicts=[
                [result(Severity.BLOCK, "FAILED  test_digits")],
                [result(Severity.BLOCK, "FAILED test_digits")],
            ],
        )
    )
    assert out.status is RunStatus.BLOCKED and out.halt_type is HaltType.BLOCKER
    assert out.reason.startswith("stuck: attempt 2")
    assert len(out.attempts) == 2


def test_recovery_budget_bounds_the_attempts() -> None:
    _, out = run(
        Script(
            dispatches=[[change("a.py")]],
            verdicts=[[result(Severity.BLOCK, f"failure {i}")] for i in range(1, 10)],
        ),
        budgets=Budgets(max_recovery=1),
    )
    assert out.status is RunStatus.BLOCKED
    assert len(out.attempts) == 2


def test_validator_error_halts() -> None:
    _, out = run(
        Script(dispatches=[[change("a.py")]], verdicts=[[result(Severity.PASS, error=True)]])
    )
    assert out.status is RunStatus.FAILED and out.halt_type is HaltType.VALIDATOR_ERROR
    assert out.attempts[0].outcome is AttemptOutcome.ERROR


def test_coder_fired_block_halt_ends_the_run_halted() -> None:
    _, out = run(
        Script(
            dispatches=[[change("a.py")]],
            verdicts=[[result(Severity.PASS)]],
            coder_fires={1: (CanonicalHalt.IRREVERSIBLE_ACTION, HaltSeverity.BLOCK)},
        )
    )
    assert out.status is RunStatus.BLOCKED and out.halt_type is HaltType.ESCALATE
    assert out.halted and out.verdict.halted
    assert [h.name for h in out.fired] == ["halt-irreversible-action"]


def test_unresolved_anchor_fires_before_any_coder() -> None:
    fx, out = run(Script(unresolved=["src/gone.py (no such file)"]))
    assert out.status is RunStatus.BLOCKED and out.halted
    assert fx.prompts == []
    assert fx.fired[0].name == "halt-anchor-resolution-failure"


def test_every_seat_lost_to_quota_refunds() -> None:
    quota = DispatchResult(
        exit_code=1,
        stop_reason=StopReason.PROVIDER_FAULT,
        quota=Quota(kind="rate_limit", detail="429"),
    )
    _, out = run(Script(dispatches=[[quota, quota]]), seats=2)
    assert out.status is RunStatus.FAILED
    assert out.verdict.quota_hit and out.verdict.no_viable_candidates


MISSING = "claude not found on PATH: install it with `npm install -g @anthropic-ai/claude-code`"


def test_a_missing_program_ends_the_run_held_not_refunded() -> None:
    broken = DispatchResult(exit_code=None, setting_error=MISSING)
    fx, out = run(Script(dispatches=[[broken]]))
    assert out.status is RunStatus.FAILED and out.halt_type is HaltType.ENVIRONMENT_ERROR
    assert out.reason == f"this machine cannot run the task as set: seat 1 (fake): {MISSING}"
    assert out.unrunnable and not out.machine_fault
    assert settle_row(out.verdict) is SettleRow.UNRUNNABLE
    assert len(fx.prompts) == 1  # no recovery wave meets it again
    assert out.attempts[0].outcome is AttemptOutcome.ERROR


def test_only_the_second_seat_missing_its_program_still_ends_the_run() -> None:
    """Seat 1 made a candidate that would pass: the run still stops at that wave, since every
    later run would meet seat 2's missing program again; nothing is validated or landed."""
    broken = DispatchResult(exit_code=None, setting_error="codex not found on PATH")
    fx, out = run(
        Script(dispatches=[[change("a.py"), broken]], verdicts=[[result(Severity.PASS)]]),
        seats=2,
    )
    assert settle_row(out.verdict) is SettleRow.UNRUNNABLE
    assert out.reason.endswith("seat 2 (fake): codex not found on PATH")
    assert fx.landed == [] and out.validations == 0


def test_a_block_halt_a_coder_fired_wins_over_a_missing_program() -> None:
    broken = DispatchResult(exit_code=None, setting_error="codex not found on PATH")
    _, out = run(
        Script(
            dispatches=[[change("a.py"), broken]],
            coder_fires={1: (CanonicalHalt.IRREVERSIBLE_ACTION, HaltSeverity.BLOCK)},
        ),
        seats=2,
    )
    assert settle_row(out.verdict) is SettleRow.HALTED  # a human sees the halt first


def test_a_turn_budget_stop_fires_the_warn_halt_and_goes_on() -> None:
    tired = DispatchResult(exit_code=0, stop_reason=StopReason.TURN_BUDGET)
    _, out = run(Script(dispatches=[[tired], [change("a.py")]], verdicts=[[result(Severity.PASS)]]))
    assert out.status is RunStatus.MERGED
    assert [h.name for h in out.fired] == ["halt-budget-exhausted"]


def test_parallel_seats_each_dispatch_and_the_passing_one_wins() -> None:
    fx, out = run(
        Script(
            dispatches=[[ChangeSet(base_commit="base"), change("b.py")]],
            verdicts=[[result(Severity.PASS)]],
        ),
        seats=2,
    )
    assert out.status is RunStatus.MERGED
    assert fx.landed == [2]
    assert out.attempts[0].coder_dispatches == 2


def test_the_graph_is_deterministic() -> None:
    script = Script(
        dispatches=[[change("a.py")], [change("a.py")]],
        verdicts=[[result(Severity.BLOCK, "x")], [result(Severity.PASS)]],
    )
    first = run(script)[1]
    second = run(script)[1]
    assert first.attempts == second.attempts and first.status == second.status


def _noop_seat(summary: str) -> DispatchResult:
    from assay.core.report import CoderReport

    return DispatchResult(exit_code=0, report=CoderReport(summary=summary))


class NoopEffects(FakeEffects):
    async def dispatch(self, call: SeatCall) -> Candidate:
        outcome = await super().dispatch(call)
        step = self.script.dispatches[min(call.attempt, len(self.script.dispatches)) - 1]
        res = step[call.seat - 1]
        assert isinstance(res, DispatchResult)
        return dataclasses.replace(outcome, report=res.report)


def test_unanimous_no_change_with_evidence_and_passing_validators_is_verified_noop() -> None:
    claim = _noop_seat("NO CHANGE NEEDED: slugify already keeps digits (test_digits passes)")
    fx = NoopEffects(Script(dispatches=[[claim, claim]], verdicts=[[result(Severity.PASS)]]))
    out = asyncio.run(run_graph(plan(seats=2), fx))
    assert out.status is RunStatus.VERIFIED_NOOP
    assert fx.landed == []
    assert "already keeps digits" in out.reason


def test_a_no_change_claim_the_validators_refute_is_not_a_noop() -> None:
    claim = _noop_seat("NO CHANGE NEEDED: looks fine to me")
    fx = NoopEffects(
        Script(dispatches=[[claim]], verdicts=[[result(Severity.BLOCK, "FAILED test_digits")]])
    )
    out = asyncio.run(run_graph(plan(budgets=Budgets(max_recovery=0)), fx))
    assert out.status is RunStatus.BLOCKED


def test_a_refuted_claim_says_which_validators_refuted_it() -> None:
    """The validators ran on the unchanged tree and failed it: the attempt's decision names
    them (the progress and the quiet output show it), the next attempt's spec quotes them,
    and the claimant's seat is no error of its own: its claim is what was checked."""
    claim = _noop_seat("NO CHANGE NEEDED: looks fine to me")
    refuting = result(Severity.BLOCK, "FAILED test_digits")
    fx = NoopEffects(Script(dispatches=[[claim]], verdicts=[[refuting]]))
    out = asyncio.run(run_graph(plan(budgets=Budgets(max_recovery=1)), fx))
    assert isinstance(out, RunResult) and out.status is RunStatus.BLOCKED
    assert out.reason == "stuck: attempt 2 failed exactly as attempt 1 did"
    decided = [e.data for e in fx.events if e.kind == "attempt.decided"]
    assert [(d["attempt"], d["next"]) for d in decided] == [(1, "recover"), (2, "end")]
    assert decided[-1]["why"] == out.reason
    assert decided[0]["failures"] == ["tests: FAILED test_digits"]
    assert "FAILED test_digits" in fx.prompts[1]  # the claim's refutation, in the next spec
    assert "the coder says no change is needed: looks fine to me" in fx.prompts[1]
    assert [e.data["error"] for e in fx.events if e.kind == "seat.finished"] == [None, None]


def test_a_claim_without_evidence_is_not_a_noop() -> None:
    fx = NoopEffects(
        Script(dispatches=[[_noop_seat("NO CHANGE NEEDED:")]], verdicts=[[result(Severity.PASS)]])
    )
    out = asyncio.run(run_graph(plan(budgets=Budgets(max_recovery=0)), fx))
    assert out.status is RunStatus.BLOCKED


# --- land: pr on a blocked run leaves a draft PR (settle: blocked_with_pr) -------------------


def test_a_stuck_run_under_land_pr_leaves_a_draft_pr_and_stays_blocked() -> None:
    fx, out = run(
        Script(
            dispatches=[[change("a.py")]],
            verdicts=[[result(Severity.BLOCK, "FAILED test_digits")]],
        ),
        land="pr",
    )
    assert out.status is RunStatus.BLOCKED and out.reason.startswith("stuck: attempt 2")
    assert fx.blocked_lands == [["tests: FAILED test_digits"]]
    assert out.verdict.left_pr and not out.verdict.halted
    assert settle_row(out.verdict) is SettleRow.BLOCKED_WITH_PR
    assert out.reason.endswith("left for review as https://github.example/o/r/pull/1")


def test_spent_recovery_under_land_pr_leaves_a_draft_pr() -> None:
    fx, out = run(
        Script(
            dispatches=[[change("a.py")]],
            verdicts=[[result(Severity.BLOCK, f"failure {i}")] for i in range(1, 10)],
        ),
        land="pr",
        budgets=Budgets(max_recovery=1),
    )
    assert out.status is RunStatus.BLOCKED and out.reason.startswith("validators still block")
    assert fx.blocked_lands == [["tests: failure 2"]]
    assert settle_row(out.verdict) is SettleRow.BLOCKED_WITH_PR


def test_a_blocked_run_under_land_branch_lands_nothing() -> None:
    fx, out = run(
        Script(dispatches=[[change("a.py")]], verdicts=[[result(Severity.BLOCK, "x")]]),
        land="branch",
    )
    assert out.status is RunStatus.BLOCKED and fx.landed == [] and out.land is None
    assert settle_row(out.verdict) is SettleRow.BLOCKED


def test_a_fired_block_halt_under_land_pr_opens_no_pr() -> None:
    fx, out = run(
        Script(
            dispatches=[[change("a.py")]],
            verdicts=[[result(Severity.PASS)]],
            coder_fires={1: (CanonicalHalt.IRREVERSIBLE_ACTION, HaltSeverity.BLOCK)},
        ),
        land="pr",
    )
    assert out.halted and fx.landed == [] and not out.verdict.left_pr
    assert settle_row(out.verdict) is SettleRow.HALTED


def test_a_passing_run_under_land_pr_lands_normally() -> None:
    fx, out = run(
        Script(dispatches=[[change("a.py")]], verdicts=[[result(Severity.PASS)]]), land="pr"
    )
    assert fx.landed == [1] and fx.blocked_lands == [] and out.status is RunStatus.MERGED


def test_a_contract_with_no_verifying_validator_fires_the_verification_gap_at_arm() -> None:
    fx, out = run(
        Script(dispatches=[[change("a.py")]], verdicts=[[result(Severity.PASS)]]), validators=[]
    )
    gap = [h for h in out.fired if h.name == CanonicalHalt.VERIFICATION_GAP.value]
    assert len(gap) == 1 and gap[0].severity is HaltSeverity.WARN
    assert "no command or judge validator" in gap[0].detail
    assert fx.prompts  # a warn halt: the run goes on


def test_a_command_validator_closes_the_verification_gap() -> None:
    _fx, out = run(Script(dispatches=[[change("a.py")]], verdicts=[[result(Severity.PASS)]]))
    assert CanonicalHalt.VERIFICATION_GAP.value not in [h.name for h in out.fired]


class MovedBaseEffects(FakeEffects):
    """The base branch moved during the run and the combined tree fails the validators."""

    async def land(self, call: LandCall) -> LandOutcome:
        self.landed.append(call.candidate.seat)
        self.attempts_seen = list(call.attempts)
        reason = "the base branch moved to abc; combined with it the validators block: tests: x"
        return LandOutcome(RunStatus.BLOCKED, reason, "assay/x", validations=1)


def test_a_landing_blocked_on_a_moved_base_blocks_the_run_and_counts_the_revalidation() -> None:
    script = Script(
        dispatches=[[change("a.py")], [change("a.py")]],
        verdicts=[[result(Severity.BLOCK, "FAILED")], [result(Severity.PASS)]],
    )
    fx = MovedBaseEffects(script)
    out = asyncio.run(run_graph(plan(), fx))
    assert out.status is RunStatus.BLOCKED and out.halt_type is HaltType.BLOCKER
    assert out.reason.startswith("the base branch moved to abc; combined with it")
    assert out.validations == 3  # attempt 1, attempt 2, and the combined tree
    assert [a.outcome for a in fx.attempts_seen] == [AttemptOutcome.BLOCKED, AttemptOutcome.PASSED]
    assert settle_row(out.verdict) is SettleRow.BLOCKED


def _overloaded(detail: str = "claude: API Error: 529 overloaded") -> DispatchResult:
    return DispatchResult(
        exit_code=1,
        stop_reason=StopReason.PROVIDER_FAULT,
        error=detail,
        fault=ProviderFault(detail),
    )


def test_every_seat_lost_to_a_provider_fault_refunds_and_names_it() -> None:
    fx, out = run(Script(dispatches=[[_overloaded(), _overloaded("codex: 503")]]), seats=2)
    assert out.status is RunStatus.FAILED and out.halt_type is HaltType.ENVIRONMENT_ERROR
    assert out.verdict.machine_fault and not out.verdict.quota_hit
    assert settle_row(out.verdict) is SettleRow.FAILED_MACHINE_FAULT
    assert out.reason == (
        "every seat lost to a provider fault: claude: API Error: 529 overloaded; codex: 503"
    )
    assert len(fx.prompts) == 2  # no recovery wave was spent on the provider's fault
    assert out.attempts[0].outcome is AttemptOutcome.ERROR


def test_identical_faults_of_several_seats_are_named_once() -> None:
    _fx, out = run(
        Script(dispatches=[[_overloaded(), _overloaded(), _overloaded("codex: 503")]]), seats=3
    )
    assert out.reason == (
        "every seat lost to a provider fault: claude: API Error: 529 overloaded (2 seats); "
        "codex: 503"
    )


def test_a_provider_fault_with_a_change_is_not_a_candidate() -> None:
    outcome = candidate_of(
        seat=1, attempt=1, coder="claude", result=_overloaded(), change=change("a.py")
    )
    assert outcome.lost_to_provider_fault and outcome.lost_to_machine and not outcome.viable


def test_a_provider_fault_never_enters_the_recovery_spec() -> None:
    """One seat lost to a 529, the other left the tree unchanged: the wave recovers, and the
    next spec carries the unchanged seat's failure but not the provider's fault."""
    script = Script(
        dispatches=[
            [_overloaded(), DispatchResult(exit_code=0)],
            [change("a.py"), change("b.py")],
        ],
        verdicts=[[result(Severity.PASS)]],
    )
    fx, out = run(script, seats=2)
    assert out.status is RunStatus.MERGED
    recovery = fx.prompts[2]
    assert "529" not in recovery and "overloaded" not in recovery
    assert "left the tree unchanged" in recovery


def test_every_seat_lost_to_the_environment_refunds() -> None:
    broken = DispatchResult(exit_code=None, environment_error="a log hit the file-size limit")
    _, out = run(Script(dispatches=[[broken]]))
    assert settle_row(out.verdict) is SettleRow.FAILED_MACHINE_FAULT


def test_a_seat_lost_to_quota_beside_a_missing_program_is_held_not_waited_for() -> None:
    quota = DispatchResult(
        exit_code=1,
        stop_reason=StopReason.PROVIDER_FAULT,
        quota=Quota(kind="rate_limit", detail="429 slow down"),
    )
    broken = DispatchResult(exit_code=None, setting_error="no API key: set OPENAI_API_KEY")
    _, out = run(Script(dispatches=[[quota, broken]]), seats=2)
    assert settle_row(out.verdict) is SettleRow.UNRUNNABLE


class UnsetJudgeEffects(FakeEffects):
    """The judge validator has no key."""

    async def validate(self, call: CandidateCall) -> list[Validation]:
        outcome = ValidationOutcome(
            result=result(Severity.BLOCK, error=True),
            setting_error="validator review: the judge cannot run: $K is not set",
        )
        return [validation_of(outcome)]


def test_a_judge_validator_without_its_key_holds_the_run() -> None:
    fx = UnsetJudgeEffects(Script(dispatches=[[change("a.py")]]))
    out = asyncio.run(run_graph(plan(), fx))
    assert settle_row(out.verdict) is SettleRow.UNRUNNABLE
    assert out.reason.endswith("validator review: the judge cannot run: $K is not set")
    assert len(fx.prompts) == 1 and fx.landed == []


def test_quota_and_a_provider_fault_together_wait_for_the_quota() -> None:
    quota = DispatchResult(
        exit_code=1,
        stop_reason=StopReason.PROVIDER_FAULT,
        quota=Quota(kind="rate_limit", detail="429 slow down"),
    )
    _, out = run(Script(dispatches=[[quota, _overloaded()]]), seats=2)
    assert settle_row(out.verdict) is SettleRow.FAILED_QUOTA_NO_VIABLE
    assert out.reason.startswith("every seat lost to a machine fault: ")
    assert "seat 1: lost to quota: 429 slow down" in out.reason
    assert "seat 2: lost to a provider fault: claude: API Error: 529" in out.reason


class FaultyJudgeEffects(FakeEffects):
    """The judge validator's provider failed after its retries."""

    async def validate(self, call: CandidateCall) -> list[Validation]:
        outcome = ValidationOutcome(
            result=result(Severity.BLOCK, error=True), fault="review: HTTP 503, 3 of 3 calls"
        )
        return [validation_of(outcome)]


def test_a_judge_lost_to_a_provider_fault_refunds() -> None:
    fx = FaultyJudgeEffects(Script(dispatches=[[change("a.py")]]))
    out = asyncio.run(run_graph(plan(), fx))
    assert out.status is RunStatus.FAILED and out.halt_type is HaltType.ENVIRONMENT_ERROR
    assert settle_row(out.verdict) is SettleRow.FAILED_MACHINE_FAULT
    assert out.reason == "a judge was lost to a provider fault: review: HTTP 503, 3 of 3 calls"
    assert len(fx.prompts) == 1 and fx.landed == []


class PanelEffects(FakeEffects):
    """Two viable candidates and a blind panel of two judges, some lost to machine facts."""

    def __init__(self, script: Script, rankings: list[list[str] | None], **lost: int) -> None:
        super().__init__(script)
        self.rankings = rankings
        self.lost = lost
        self.unset: tuple[str, ...] = ()

    async def judge(self, call: JudgeCall) -> JudgeRound:
        plan, seats = call.plan, call.candidates
        labels = {s.seat: "AB"[i] for i, s in enumerate(seats)}
        problems = tuple(
            f"judge {i + 1} (llm m): HTTP 503, 3 of 3 calls"
            for i, ranking in enumerate(self.rankings)
            if ranking is None
        )
        return JudgeRound(
            tally=tally(["A", "B"], len(self.rankings), self.rankings, plan.run_id),
            labels=labels,
            calls=len(self.rankings),
            problems=problems,
            setting_errors=self.unset,
            **self.lost,
        )


def judged(rankings: list[list[str] | None], **lost: int) -> RunResult:
    script = Script(
        dispatches=[[change("a.py"), change("b.py")]], verdicts=[[result(Severity.PASS)]]
    )
    fx = PanelEffects(script, rankings, **lost)
    out = asyncio.run(run_graph(plan(seats=2, judges=2), fx))
    assert fx.landed == []
    return out


def test_a_judge_this_machine_cannot_run_holds_the_run() -> None:
    script = Script(
        dispatches=[[change("a.py"), change("b.py")]], verdicts=[[result(Severity.PASS)]]
    )
    fx = PanelEffects(script, [["A", "B"], None])
    fx.unset = ("judge 2 (codex): codex not found on PATH",)
    out = asyncio.run(run_graph(plan(seats=2, judges=2), fx))
    assert settle_row(out.verdict) is SettleRow.UNRUNNABLE
    assert out.reason.endswith("judge 2 (codex): codex not found on PATH")
    assert fx.landed == []


def test_judges_lost_to_a_provider_fault_refund_the_run() -> None:
    out = judged([None, None], lost_to_fault=2)
    assert out.status is RunStatus.FAILED and out.halt_type is HaltType.ENVIRONMENT_ERROR
    assert out.machine_fault and not out.quota_hit
    assert settle_row(out.verdict) is SettleRow.FAILED_MACHINE_FAULT
    assert out.reason == (
        "no quorum: 0 usable ranking(s) of 2 needed, 2 judge(s) lost to a provider fault: "
        "judge 1 (llm m): HTTP 503, 3 of 3 calls; judge 2 (llm m): HTTP 503, 3 of 3 calls"
    )


def test_a_provider_fault_that_could_not_make_the_quorum_spends() -> None:
    # Two of three judges gave no usable ranking for their own reasons; one lost to a fault
    # could not have made the quorum of two alone, so the attempt is spent.
    out = judged([None, None, None], lost_to_fault=1)
    assert out.status is RunStatus.STALLED and out.halt_type is HaltType.VALIDATOR_ERROR
    assert not out.machine_fault
    assert settle_row(out.verdict) is SettleRow.STALLED_OR_FAILED


def test_judges_lost_to_quota_and_a_fault_wait_for_the_quota() -> None:
    out = judged([None, None], lost_to_fault=1, lost_to_quota=1)
    assert out.status is RunStatus.STALLED and out.quota_hit and not out.machine_fault
    assert settle_row(out.verdict) is SettleRow.STALLED_QUOTA
    assert "1 judge(s) lost to quota, 1 judge(s) lost to a provider fault: " in out.reason


def test_waves_that_change_nothing_the_same_way_twice_are_stuck() -> None:
    """A coder that never changes anything does not loop through the recovery budget."""
    _, out = run(
        Script(dispatches=[[DispatchResult(exit_code=0)]]), budgets=Budgets(max_recovery=20)
    )
    assert out.status is RunStatus.BLOCKED and out.halt_type is HaltType.BLOCKER
    assert out.reason.startswith("stuck: attempt 2 failed exactly as attempt 1 did")
    assert len(out.attempts) == 2 and len(out.dispatches) == 2


def test_empty_waves_that_fail_differently_go_on_recovering() -> None:
    script = Script(
        dispatches=[
            [DispatchResult(exit_code=1, error="exit 1: no such file")],
            [DispatchResult(exit_code=0)],
            [change("a.py")],
        ],
        verdicts=[[result(Severity.PASS)]],
    )
    _, out = run(script, budgets=Budgets(max_recovery=2))
    assert out.status is RunStatus.MERGED
    assert len(out.attempts) == 3


def test_a_wave_partly_lost_to_a_machine_fact_is_never_called_stuck() -> None:
    """Seats lost to a provider fault say nothing about the coder: two such waves in a row
    are not "stuck", the run goes on to its next wave."""
    script = Script(
        dispatches=[
            [_overloaded(), DispatchResult(exit_code=0)],
            [_overloaded(), DispatchResult(exit_code=0)],
            [change("a.py"), change("b.py")],
        ],
        verdicts=[[result(Severity.PASS)]],
    )
    _, out = run(script, seats=2, budgets=Budgets(max_recovery=2))
    assert out.status is RunStatus.MERGED


class RunEffects(FakeEffects):
    """The whole run: open hands out the plan, record keeps what it was given."""

    def __init__(self, script: Script, broken: BaseException | None = None) -> None:
        super().__init__(script)
        self.broken = broken
        self.recorded: list[RunResult] = []

    async def open(self, call: OpenRequest) -> RunHandle:
        opened = plan()
        return RunHandle(dataclasses.replace(opened, run_id=call.run_id), "worker-q", NOW)

    async def arm(self, plan: RunPlan) -> None:
        if self.broken is not None:
            raise self.broken

    async def record(self, call: RecordCall) -> RunRecorded:
        assert call.handle.worker == "worker-q"
        self.recorded.append(call.result)
        return RunRecorded(
            run_id=call.handle.plan.run_id,
            status=call.result.status,
            task=Task.new(id="t1", title="t", instruction="x", now=NOW),
            settlement=Settlement(
                row=SettleRow.SUCCEEDED, new_status=TaskStatus.DONE, attempt_spent=True
            ),
            payload=None,  # type: ignore[arg-type]
            payload_path=None,
        )


NOW = datetime(2026, 12, 2, tzinfo=UTC)
PASSING = Script(dispatches=[[change("a.py")]], verdicts=[[result(Severity.PASS)]])


def test_run_graph_opens_runs_the_attempts_and_records_the_result() -> None:
    fx = RunEffects(PASSING)
    recorded = asyncio.run(run_whole(OpenRequest("t1", "r9"), fx))
    assert recorded.run_id == "r9" and recorded.status is RunStatus.MERGED
    (closed,) = fx.recorded
    assert closed.status is RunStatus.MERGED and not closed.journaled
    assert {e.run_id for e in fx.events} == {"r9"}  # every event names its run


def test_an_environment_fault_of_an_effect_is_recorded_as_a_refunded_failure() -> None:
    fault = EffectFault(FaultKind.ENVIRONMENT, "environment error: no space left on device")
    fx = RunEffects(PASSING, broken=fault)
    asyncio.run(run_whole(OpenRequest("t1", "r1"), fx))
    (closed,) = fx.recorded
    assert closed.status is RunStatus.FAILED and closed.halt_type is HaltType.ENVIRONMENT_ERROR
    assert closed.machine_fault and closed.journaled  # counted from the journal
    assert settle_row(closed.verdict) is SettleRow.FAILED_MACHINE_FAULT
    assert closed.reason == "environment error: no space left on device"


def test_a_bug_is_recorded_as_an_internal_error_with_its_traceback() -> None:
    fx = RunEffects(PASSING, broken=KeyError("seat"))
    asyncio.run(run_whole(OpenRequest("t1", "r1"), fx))
    (closed,) = fx.recorded
    assert closed.status is RunStatus.FAILED and closed.halt_type is HaltType.INTERNAL_ERROR
    assert closed.reason == "internal error: KeyError('seat')"
    assert closed.trace and "KeyError" in closed.trace and not closed.machine_fault


def test_a_stopped_run_passes_through_unrecorded_for_the_executor_to_close() -> None:
    fx = RunEffects(PASSING, broken=RunStopped("the worker was lost"))
    with pytest.raises(RunStopped):
        asyncio.run(run_whole(OpenRequest("t1", "r1"), fx))
    assert fx.recorded == []


def test_a_coder_that_timed_out_is_said_to_have_met_its_time_limit() -> None:
    timed_out = DispatchResult(exit_code=None, timed_out=True)
    fx, out = run(Script(dispatches=[[timed_out]], verdicts=[[]]), budgets=Budgets(max_recovery=0))
    assert isinstance(out, RunResult) and out.status is RunStatus.BLOCKED
    (seat,) = [e.data for e in fx.events if e.kind == "seat.finished"]
    assert seat["error"] == (
        "timed out: stopped at the coder's `timeout_seconds` before it changed anything"
    )
