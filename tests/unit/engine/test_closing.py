"""The one pure close: settlement, payload and the ledger's close rows from a run's result,
the same whether the executor that ran the graph records it or recovery closes a dead run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from assay.adapters.store.records import DispatchRecord
from assay.adapters.store.usage_log import DispatchUsage
from assay.core.attempts import AttemptRecord
from assay.core.backoff import quota_wait
from assay.core.contract import Contract, ValidatorSpec
from assay.core.payload import HaltNotice
from assay.core.quota import Quota
from assay.core.settle import RefundStreak
from assay.core.tasks import Task
from assay.core.usage import UsageFigures
from assay.core.vocab import (
    AttemptOutcome,
    HaltSeverity,
    HaltType,
    LandMode,
    RunStatus,
    SettleRow,
    TaskStatus,
)
from assay.engine.close import CloseFacts, close_run
from assay.engine.local.metering import coder_key
from assay.engine.run_result import RunResult
from assay.engine.values import Candidate, DispatchSummary, LandOutcome

NOW = datetime(2026, 12, 2, 2, 0, tzinfo=UTC)


def _task() -> Task:
    task = Task.new(id="t1", title="t", instruction="Fix slugify.", now=NOW)
    task.start(NOW, run_id="r1")
    return task


def _facts(result: RunResult, **given: object) -> CloseFacts:
    contract = Contract(task="Fix slugify.", validators=[ValidatorSpec(id="tests", run="true")])
    settings: dict[str, object] = {
        "task": _task(),
        "run_id": "r1",
        "dispatch_id": "r1",
        "contract": contract,
        "result": result,
        "started_at": NOW,
        "settled_at": NOW + timedelta(seconds=5),
        "finished_at": NOW + timedelta(seconds=6),
    }
    settings.update(given)
    return CloseFacts(**settings)  # type: ignore[arg-type]


def _seat(seat: int, **dispatch: object) -> Candidate:
    return Candidate(
        seat=seat,
        attempt=1,
        coder="command",
        dispatch=DispatchSummary(exit_code=0, tokens_used=10, cost_usd=0.5, **dispatch),  # type: ignore[arg-type]
        files=["a.py"],
    )


def _attempt(outcome: AttemptOutcome, dispatches: int) -> AttemptRecord:
    return AttemptRecord(attempt=1, outcome=outcome, coder_dispatches=dispatches)


def test_a_merged_run_closes_done_with_its_candidates_and_dispatches() -> None:
    result = RunResult(RunStatus.MERGED, HaltType.NONE, "merged")
    result.dispatches = [_seat(1), _seat(2)]
    result.attempts = [_attempt(AttemptOutcome.PASSED, 2)]
    result.winner = result.dispatches[0]
    result.labels = {1: "A", 2: "B"}
    result.land = LandOutcome(RunStatus.MERGED, "merged", "assay/r1/seat-1")
    journal = [
        DispatchUsage(coder_key("t1", "r1", 1, seat, "command"), UsageFigures(7, 3, 0.5))
        for seat in (1, 2)
    ]
    facts = _facts(result, usage=journal)
    closing = close_run(facts)
    assert closing.settlement.row is SettleRow.SUCCEEDED
    assert closing.task.status is TaskStatus.DONE
    assert facts.task.status is TaskStatus.RUNNING  # the input is left as it was
    payload = closing.payload
    assert payload.finished_at == NOW + timedelta(seconds=6)
    assert [c.label for c in payload.candidates] == ["A", "B"]
    assert payload.usage.tokens == 20 and payload.usage.cost_usd == 1.0
    assert payload.land is not None and payload.land.mode is LandMode.MERGE
    row = closing.row
    assert [d.dispatch_id for d in row.dispatches] == ["r1.a1.s1", "r1.a1.s2"]
    assert [(d.tokens_used, d.cost_usd) for d in row.dispatches] == [(10, 0.5), (10, 0.5)]
    assert row.land_attempts == 1 and row.payload_path is None and row.events == []
    assert row.task == closing.task and row.finished_at == payload.finished_at


def test_an_interrupted_run_is_parked_and_counted_from_its_journal() -> None:
    result = RunResult(RunStatus.FAILED, HaltType.ENVIRONMENT_ERROR, "interrupted")
    result.parked = True
    result.attempts = [_attempt(AttemptOutcome.ERROR, 1)]
    journaled = [DispatchRecord(dispatch_id="r1.a1.s1", attempt=1, seat=1, coder="claude")]
    closing = close_run(_facts(result, dispatches=journaled))
    assert closing.settlement.row is SettleRow.PARKED
    assert not closing.settlement.attempt_spent  # refunded: the machine's fault
    assert closing.row.dispatches == journaled
    assert closing.task.not_before is None  # a parked run waits for nothing


def test_a_run_lost_to_quota_waits_by_the_streak_it_is_given() -> None:
    result = RunResult(RunStatus.FAILED, HaltType.ENVIRONMENT_ERROR, "every seat lost to quota")
    result.dispatches = [_seat(1, quota=Quota("rate_limit", "429"))]
    result.attempts = [_attempt(AttemptOutcome.ERROR, 1)]
    result.quota_hit = result.no_viable_candidates = True
    facts = _facts(result, quota_streak=2)
    closing = close_run(facts)
    assert closing.settlement.row is SettleRow.FAILED_QUOTA_NO_VIABLE
    assert closing.task.not_before == quota_wait(None, facts.settled_at, 3)


def test_a_machine_fault_backs_off_on_the_refund_streak() -> None:
    result = RunResult(RunStatus.FAILED, HaltType.ENVIRONMENT_ERROR, "529")
    result.machine_fault = True
    streak = RefundStreak(count=1, faults=("529",))
    facts = _facts(result, refunds=streak)
    closing = close_run(facts)
    assert closing.settlement.row is SettleRow.FAILED_MACHINE_FAULT
    assert closing.task.not_before == quota_wait(None, facts.settled_at, 2)


def test_halts_attestation_left_unattested_are_in_the_payload() -> None:
    result = RunResult(RunStatus.READY, HaltType.NONE, "branch left")
    notice = HaltNotice(name="halt-x", severity=HaltSeverity.WARN, detail="not attested")
    closing = close_run(_facts(result, unattested=[notice]))
    assert [h.name for h in closing.payload.halts.warnings] == ["halt-x"]
