"""The convergence ledger: counters, verdicts, laps and oscillation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.core.ledger import (
    MAX_LAP_HISTORY,
    ConvergenceLedger,
    StageRecord,
    finding_signatures,
    normalise_finding,
    outcome_verdict,
    task_verdict,
)
from assay.core.vocab import AttemptOutcome, Stage, StageVerdict, TaskStatus

STAGES = list(Stage)
VERDICTS = list(StageVerdict)
findings = st.lists(st.text(alphabet=st.sampled_from("ab \t\n"), max_size=6), max_size=6)


def test_signatures_are_normalised_sorted_unique() -> None:
    raw = ["  b   failed\n", "a  failed", "b failed", "", "   ", "a\tfailed"]
    assert finding_signatures(raw) == ["a failed", "b failed"]


def test_normalise_collapses_inner_whitespace() -> None:
    assert normalise_finding("\t x \n\n y  ") == "x y"


def test_stage_record_defaults() -> None:
    record = StageRecord()
    assert record.attempts == 0
    assert record.last_verdict is StageVerdict.UNVISITED
    assert record.last_finding_signatures == []


def test_stage_record_rejects_negative_attempts() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        StageRecord(attempts=-1)


def test_increment_and_read_attempts() -> None:
    ledger = ConvergenceLedger(task_id="t1")
    assert ledger.attempts(Stage.TASK) == 0
    assert ledger.increment_attempts(Stage.TASK) == 1
    assert ledger.increment_attempts("dispatch", by=4) == 4
    assert ledger.attempts("task") == 1
    assert ledger.stage_state["dispatch"].attempts == 4


def test_increment_refuses_to_go_down() -> None:
    ledger = ConvergenceLedger(task_id="t1")
    with pytest.raises(ValueError, match="only go up"):
        ledger.increment_attempts(Stage.TASK, by=-1)


def test_reset_keeps_verdict() -> None:
    ledger = ConvergenceLedger(task_id="t1")
    ledger.increment_attempts(Stage.TASK, by=3)
    ledger.record_verdict(Stage.TASK, StageVerdict.ESCALATE, ["x"])
    ledger.reset_attempts(Stage.TASK)
    record = ledger.stage_state["task"]
    assert (record.attempts, record.last_verdict, record.last_finding_signatures) == (
        0,
        StageVerdict.ESCALATE,
        ["x"],
    )


def test_unknown_stage_is_refused() -> None:
    ledger = ConvergenceLedger(task_id="t1")
    with pytest.raises(ValueError):
        ledger.increment_attempts("auto_agent")
    with pytest.raises(ValueError):
        ConvergenceLedger(task_id="t1", stage_state={"nope": StageRecord()})


def test_record_verdict_normalises_signatures() -> None:
    ledger = ConvergenceLedger(task_id="t1")
    ledger.record_verdict(Stage.RECOVER, StageVerdict.LOOP_BACK, ["b  x", "a", "a "])
    assert ledger.stage_state["recover"].last_finding_signatures == ["a", "b x"]


def test_converged_follows_task_verdict() -> None:
    ledger = ConvergenceLedger(task_id="t1")
    ledger.record_verdict(Stage.RECOVER, StageVerdict.ADVANCE)
    assert not ledger.converged
    ledger.record_verdict(Stage.TASK, StageVerdict.ADVANCE)
    assert ledger.converged
    ledger.record_verdict(Stage.TASK, StageVerdict.LOOP_BACK)
    assert not ledger.converged


def _lap(ledger: ConvergenceLedger, signatures: list[str]) -> None:
    verdict = StageVerdict.LOOP_BACK if signatures else StageVerdict.ADVANCE
    ledger.record_verdict(Stage.RECOVER, verdict, signatures)
    ledger.mark_lap()


def test_mark_lap_appends_current_set() -> None:
    ledger = ConvergenceLedger(task_id="t1")
    _lap(ledger, ["b", "a"])
    _lap(ledger, [])
    assert ledger.laps == 2
    assert ledger.lap_signatures == [["a", "b"], []]


@pytest.mark.parametrize(
    ("laps", "expected"),
    [
        ([], False),
        ([["a"]], False),
        ([["a"], ["b"]], False),
        ([["a"], ["a"]], True),  # stuck
        ([["a"], ["b"], ["a"]], True),  # two-step oscillation
        ([["a"], ["b"], ["c"], ["a"]], False),  # outside the window
        ([[], []], False),  # no findings is progress, not a loop
        ([["a"], ["a"], []], False),  # the newest lap decides
    ],
)
def test_oscillation_window_two(laps: list[list[str]], expected: bool) -> None:
    ledger = ConvergenceLedger(task_id="t1")
    for signatures in laps:
        _lap(ledger, signatures)
    assert ledger.is_oscillating() is expected
    assert ledger.oscillating is expected


def test_wider_window_sees_further_back() -> None:
    ledger = ConvergenceLedger(task_id="t1")
    for signatures in (["a"], ["b"], ["c"], ["a"]):
        _lap(ledger, signatures)
    assert not ledger.is_oscillating(window=2)
    assert ledger.is_oscillating(window=3)
    with pytest.raises(ValueError):
        ledger.is_oscillating(window=0)


def test_lap_history_is_bounded_but_laps_exact() -> None:
    ledger = ConvergenceLedger(task_id="t1")
    for n in range(MAX_LAP_HISTORY + 5):
        _lap(ledger, [f"f{n}"])
    assert ledger.laps == MAX_LAP_HISTORY + 5
    assert len(ledger.lap_signatures) == MAX_LAP_HISTORY
    assert ledger.lap_signatures[-1] == [f"f{MAX_LAP_HISTORY + 4}"]


def test_derived_flags_recomputed_on_load() -> None:
    loaded = ConvergenceLedger(
        task_id="t1",
        stage_state={"task": StageRecord(attempts=2, last_verdict=StageVerdict.ADVANCE)},
        laps=2,
        lap_signatures=[["x"], ["x"]],
        converged=False,
        oscillating=False,
    )
    assert loaded.converged
    assert loaded.oscillating
    with pytest.raises(ValueError, match="fewer than the laps kept"):
        ConvergenceLedger(task_id="t1", laps=0, lap_signatures=[["x"]])


def test_round_trips_through_json() -> None:
    ledger = ConvergenceLedger(task_id="t1")
    ledger.increment_attempts(Stage.DISPATCH, by=3)
    _lap(ledger, ["x"])
    again = ConvergenceLedger.model_validate_json(ledger.model_dump_json())
    assert again == ledger


def test_outcome_and_task_verdicts() -> None:
    assert outcome_verdict(AttemptOutcome.PASSED) is StageVerdict.ADVANCE
    assert outcome_verdict(AttemptOutcome.WARNED) is StageVerdict.ADVANCE
    assert outcome_verdict(AttemptOutcome.BLOCKED) is StageVerdict.LOOP_BACK
    assert outcome_verdict(AttemptOutcome.ERROR) is StageVerdict.ESCALATE
    assert task_verdict(TaskStatus.DONE) is StageVerdict.ADVANCE
    assert task_verdict(TaskStatus.HELD) is StageVerdict.ESCALATE
    assert task_verdict(TaskStatus.FAILED) is StageVerdict.LOOP_BACK
    assert task_verdict(TaskStatus.QUEUED) is StageVerdict.LOOP_BACK


@given(findings)
def test_signatures_idempotent(raw: list[str]) -> None:
    once = finding_signatures(raw)
    assert finding_signatures(once) == once
    assert once == sorted(set(once))
    assert all(sig and sig == sig.strip() and "  " not in sig for sig in once)
    assert all(not any(c in sig for c in "\t\n") for sig in once)


operations = st.lists(
    st.one_of(
        st.tuples(st.just("inc"), st.sampled_from(STAGES), st.integers(0, 5)),
        st.tuples(st.just("verdict"), st.sampled_from(STAGES), st.sampled_from(VERDICTS), findings),
        st.tuples(st.just("reset"), st.sampled_from(STAGES)),
        st.tuples(st.just("lap"), st.sampled_from(STAGES)),
    ),
    max_size=40,
)


@given(operations)
def test_record_verdict_never_changes_attempts(ops: list[tuple[object, ...]]) -> None:
    ledger = ConvergenceLedger(task_id="t1")
    for op in ops:
        before = {stage: ledger.attempts(stage) for stage in STAGES}
        match op:
            case ("inc", stage, by):
                ledger.increment_attempts(stage, by=by)  # type: ignore[arg-type]
            case ("verdict", stage, verdict, raw):
                ledger.record_verdict(stage, verdict, raw)  # type: ignore[arg-type]
                assert {s: ledger.attempts(s) for s in STAGES} == before
            case ("reset", stage):
                ledger.reset_attempts(stage)  # type: ignore[arg-type]
            case ("lap", stage):
                ledger.mark_lap(stage)  # type: ignore[arg-type]
                assert {s: ledger.attempts(s) for s in STAGES} == before
        assert all(record.attempts >= 0 for record in ledger.stage_state.values())
        assert ledger.oscillating == ledger.is_oscillating()
        assert len(ledger.lap_signatures) <= min(ledger.laps, MAX_LAP_HISTORY)
