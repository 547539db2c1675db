"""Every value that crosses the effect boundary survives Temporal's pydantic data converter:
what a workflow's history holds is what the worker sent, field by field."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from assay.core.attempts import AttemptRecord
from assay.core.changes import TypeChange
from assay.core.contract import Budgets, Contract, ValidatorSpec
from assay.core.payload import HaltNotice, build_payload
from assay.core.policy import decide
from assay.core.report import CoderReport, DiffComparison
from assay.core.results import ValidatorResult
from assay.core.settle import Verdict, settle
from assay.core.tally import tally
from assay.core.tasks import Task
from assay.core.vocab import (
    AttemptOutcome,
    CanonicalHalt,
    EntryType,
    EventKind,
    HaltSeverity,
    HaltType,
    RunStatus,
    Severity,
    StopReason,
)
from assay.engine.effects import (
    Candidate,
    CandidateCall,
    DispatchSummary,
    FireCall,
    JudgeCall,
    JudgeRound,
    LandCall,
    LandOutcome,
    OpenRequest,
    Quota,
    RecordCall,
    RunEvent,
    RunHandle,
    RunPlan,
    RunRecorded,
    SeatCall,
    Validation,
)
from assay.engine.run_result import RunResult

temporal_pydantic = pytest.importorskip("temporalio.contrib.pydantic")
converter = temporal_pydantic.pydantic_data_converter.payload_converter

NOW = datetime(2026, 12, 2, 1, 30, tzinfo=UTC)


def _plan() -> RunPlan:
    contract = Contract(
        task="Fix slugify.",
        budgets=Budgets(max_recovery=2),
        validators=[ValidatorSpec(id="tests", run="pytest -q")],
    )
    return RunPlan("t1", "r1", "r1", contract, Path("/repo"), "base", "main")


def _candidate(seat: int = 1, **dispatch: Any) -> Candidate:
    return Candidate(
        seat=seat,
        attempt=2,
        coder="command",
        dispatch=DispatchSummary(
            exit_code=0,
            stop_reason=StopReason.TURN_BUDGET,
            tokens_used=120,
            cost_usd=0.25,
            turns_used=3,
            wall_time_ms=900,
            **dispatch,
        ),
        commit="c" * 40,
        files=["a.py", "b/c.py"],
        type_changes=[TypeChange(path="b/c.py", before=EntryType.SYMLINK, after=EntryType.FILE)],
        insertions=7,
        deletions=2,
        report=CoderReport(summary="did it"),
        comparison=DiffComparison(claimed_but_missing=["x.py"]),
    )


def _result() -> RunResult:
    result = RunResult(RunStatus.MERGED, HaltType.NONE, "merged")
    result.attempts = [AttemptRecord(attempt=1, outcome=AttemptOutcome.PASSED, coder_dispatches=2)]
    result.dispatches = [_candidate(1), _candidate(2, quota=Quota("rate_limit", "429", NOW))]
    result.winner = result.dispatches[0]
    result.validator_results = [ValidatorResult(validator_id="tests", severity=Severity.PASS)]
    result.policy_decision = decide(result.validator_results, Contract(task="x").policy)
    result.fired = [HaltNotice(name="halt-x", severity=HaltSeverity.WARN, detail="d")]
    result.land = LandOutcome(RunStatus.MERGED, "merged", "assay/r1/seat-1", validations=1)
    result.quota_reset_at = NOW
    result.tally = tally(["A", "B"], 2, [["A", "B"], ["A", "B"]], "r1")
    result.labels = {1: "A", 2: "B"}
    result.trace = "Traceback: ..."
    return result


def _recorded() -> RunRecorded:
    task = Task(id="t1", title="Fix", instruction="Fix slugify.", created_at=NOW, updated_at=NOW)
    task.start(NOW, run_id="r1")
    settlement = settle(task, Verdict(status=RunStatus.MERGED), "merged", 3, NOW)
    payload = build_payload(
        task_id="t1",
        run_id="r1",
        dispatch_id="r1",
        status=RunStatus.MERGED,
        halt_type=HaltType.NONE,
        reason="merged",
        task_status=settlement.new_status,
        attempt_spent=settlement.attempt_spent,
        task_spec="Fix slugify.",
        attempts=[],
        started_at=NOW,
        finished_at=NOW,
    )
    return RunRecorded("r1", RunStatus.MERGED, task, settlement, payload, "/p.json", ["w"])


def boundary_values() -> list[object]:
    plan = _plan()
    handle = RunHandle(plan, "assay-host-1-abc", NOW)
    judged = JudgeRound(
        tally=tally(["A", "B"], 1, [["B", "A"]], "r1"),
        labels={1: "A", 2: "B"},
        calls=1,
        lost_to_quota=1,
        quota_reset_at=NOW,
        problems=("judge 2 (llm m): 529",),
    )
    validation = Validation(
        result=ValidatorResult(validator_id="secrets", severity=Severity.BLOCK, findings=["f"]),
        fire=CanonicalHalt.SECRET_EXPOSURE,
        evidence="a key in a.py",
        quota=Quota("usage_limit", "spent"),
        fault="HTTP 503",
    )
    return [
        OpenRequest("t1", "r1", keep_worktrees=True),
        handle,
        plan,
        SeatCall(plan, 1, 2, "Fix slugify."),
        _candidate(fault="claude: 529", environment_error="no disk", error="crashed"),
        CandidateCall(plan, _candidate()),
        validation,
        JudgeCall(plan, 1, [_candidate(1), _candidate(2)]),
        judged,
        FireCall(plan, CanonicalHalt.BUDGET_EXHAUSTED, "seat 1: timed out"),
        LandCall(plan, _candidate(), blocked=True, failures=["tests: 1 failed"]),
        LandOutcome(RunStatus.BLOCKED, "left", "b", left_pr=True, pr_url="https://x/1"),
        RunEvent(EventKind.SEAT_FINISHED, {"seat": 1, "files": ["a.py"]}, run_id="r1"),
        RecordCall(handle, _result()),
        _recorded(),
    ]


# The values whose type a bare ``type()`` does not name: lists, with the hint an activity has.
LISTS: list[tuple[object, object]] = [
    ([HaltNotice(name="halt-x", severity=HaltSeverity.BLOCK, detail="d", fired_at="t")],
     list[HaltNotice]),
    (["src/a.py: missing"], list[str]),
    ([Validation(ValidatorResult(validator_id="scope", severity=Severity.PASS))],
     list[Validation]),
]  # fmt: skip


@pytest.mark.parametrize("value", boundary_values(), ids=lambda v: type(v).__name__)
def test_every_boundary_value_round_trips_through_temporals_pydantic_converter(
    value: object,
) -> None:
    payload = converter.to_payloads([value])
    (back,) = converter.from_payloads(payload, [type(value)])
    assert back == value
    assert type(back) is type(value)


@pytest.mark.parametrize("value,hint", LISTS, ids=lambda v: str(v)[:20])
def test_lists_round_trip_by_their_hint(value: object, hint: Any) -> None:
    (back,) = converter.from_payloads(converter.to_payloads([value]), [hint])
    assert back == value


def test_a_candidate_keeps_its_judgement_across_the_boundary() -> None:
    lost = _candidate(quota=Quota("rate_limit", "429", NOW))
    payload = converter.to_payloads([lost])
    (back,) = converter.from_payloads(payload, [Candidate])
    assert back.lost_to_quota and back.lost_to_machine and not back.viable
    assert back.type_changes[0].replaces_symlink


def test_no_diff_crosses_the_boundary() -> None:
    names = {f for f in Candidate.__dataclass_fields__}
    assert "diff" not in names and "change" not in names and "worktree" not in names
