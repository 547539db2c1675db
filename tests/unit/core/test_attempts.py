"""Attempt outcomes and the payload's attempts summary (seed 000 as amended)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from assay.core.attempts import (
    MAX_ATTEMPT_HISTORY,
    AttemptRecord,
    AttemptsSummary,
    attempt_outcome,
    summarize_attempts,
)
from assay.core.results import ValidatorResult
from assay.core.vocab import AttemptOutcome, Severity


def _result(severity: Severity, *, error: bool = False, advisory: bool = False) -> ValidatorResult:
    return ValidatorResult(
        validator_id=f"v-{severity}", severity=severity, error=error, advisory=advisory
    )


PASS = _result(Severity.PASS)
WARN = _result(Severity.WARN)
BLOCK = _result(Severity.BLOCK)
ERROR = _result(Severity.PASS, error=True)


@pytest.mark.parametrize(
    ("results", "fault", "expected"),
    [
        ([], False, AttemptOutcome.PASSED),
        ([PASS, PASS], False, AttemptOutcome.PASSED),
        ([PASS, WARN], False, AttemptOutcome.WARNED),
        ([WARN, BLOCK], False, AttemptOutcome.BLOCKED),
        ([BLOCK, ERROR], False, AttemptOutcome.ERROR),
        ([PASS], True, AttemptOutcome.ERROR),
        ([], True, AttemptOutcome.ERROR),
        ([_result(Severity.BLOCK, advisory=True)], False, AttemptOutcome.WARNED),
        # an advisory validator that could not run only warned: the attempt did not error
        ([PASS, _result(Severity.BLOCK, error=True, advisory=True)], False, AttemptOutcome.WARNED),
        ([_result(Severity.WARN, error=True, advisory=True), BLOCK], False, AttemptOutcome.BLOCKED),
        ([_result(Severity.WARN, error=True, advisory=True), ERROR], False, AttemptOutcome.ERROR),
    ],
)
def test_attempt_outcome_rule(
    results: list[ValidatorResult], fault: bool, expected: AttemptOutcome
) -> None:
    assert attempt_outcome(results, operational_fault=fault) is expected


def test_an_errored_pass_is_never_a_pass() -> None:
    assert attempt_outcome([ERROR]) is AttemptOutcome.ERROR


def _records(outcomes: list[AttemptOutcome], dispatches: list[int]) -> list[AttemptRecord]:
    return [
        AttemptRecord(attempt=i + 1, outcome=o, coder_dispatches=d)
        for i, (o, d) in enumerate(zip(outcomes, dispatches, strict=True))
    ]


def test_clean_pass_is_one_attempt_without_omitted() -> None:
    summary = summarize_attempts(_records([AttemptOutcome.PASSED], [1]))
    assert summary.to_json() == {
        "total": 1,
        "coder_dispatches": 1,
        "history": [{"attempt": 1, "outcome": "passed"}],
    }
    assert "omitted" not in summary.model_dump()
    assert "omitted" not in json.loads(summary.model_dump_json())


def test_hard_won_pass_differs_from_a_clean_one() -> None:
    chain = [AttemptOutcome.ERROR, AttemptOutcome.BLOCKED, AttemptOutcome.PASSED]
    summary = summarize_attempts(_records(chain, [1, 2, 0]))
    assert summary.total == 3
    assert summary.coder_dispatches == 3
    assert [entry.outcome for entry in summary.history] == chain


def test_history_is_cut_to_the_newest_twenty() -> None:
    records = _records([AttemptOutcome.BLOCKED] * 25, [1] * 25)
    summary = summarize_attempts(records)
    data = summary.to_json()
    assert data["total"] == 25
    assert data["omitted"] == 5
    assert [entry["attempt"] for entry in data["history"]] == list(range(6, 26))


def test_omitted_is_absent_when_nested_in_another_model() -> None:
    class Payload(BaseModel):
        attempts: AttemptsSummary

    payload = Payload(attempts=summarize_attempts([]))
    assert payload.model_dump() == {"attempts": {"total": 0, "coder_dispatches": 0, "history": []}}


def test_records_are_ordered_by_attempt_number() -> None:
    records = _records([AttemptOutcome.BLOCKED, AttemptOutcome.PASSED], [1, 1])
    summary = summarize_attempts(list(reversed(records)))
    assert [entry.attempt for entry in summary.history] == [1, 2]


def test_record_validation() -> None:
    with pytest.raises(ValidationError):
        AttemptRecord(attempt=0, outcome=AttemptOutcome.PASSED, coder_dispatches=0)
    with pytest.raises(ValidationError):
        AttemptRecord(attempt=1, outcome=AttemptOutcome.PASSED, coder_dispatches=-1)
    with pytest.raises(ValidationError):
        AttemptRecord.model_validate({"attempt": 1, "outcome": "abstained", "coder_dispatches": 0})


def test_negative_max_history_is_refused() -> None:
    with pytest.raises(ValueError, match="max_history"):
        summarize_attempts([], max_history=-1)


def test_zero_max_history_omits_everything() -> None:
    summary = summarize_attempts(_records([AttemptOutcome.PASSED] * 3, [1, 1, 1]), max_history=0)
    assert summary.history == []
    assert summary.omitted == 3


chains = st.lists(
    st.tuples(st.sampled_from(list(AttemptOutcome)), st.integers(min_value=0, max_value=5)),
    max_size=60,
)


@given(chains)
def test_summary_counts_are_exact_and_history_bounded(
    chain: list[tuple[AttemptOutcome, int]],
) -> None:
    records = _records([o for o, _ in chain], [d for _, d in chain])
    summary = summarize_attempts(records)
    n = len(records)
    assert summary.total == n
    assert summary.coder_dispatches == sum(d for _, d in chain)
    assert len(summary.history) == min(n, MAX_ATTEMPT_HISTORY)
    if n > MAX_ATTEMPT_HISTORY:
        assert summary.omitted == n - MAX_ATTEMPT_HISTORY
        assert summary.to_json()["omitted"] == n - MAX_ATTEMPT_HISTORY
    else:
        assert summary.omitted is None
        assert "omitted" not in summary.to_json()
    newest = records[max(0, n - MAX_ATTEMPT_HISTORY) :]
    assert [(e.attempt, e.outcome) for e in summary.history] == [
        (r.attempt, r.outcome) for r in newest
    ]


@given(chains, st.integers(min_value=0, max_value=30))
def test_summary_respects_any_bound(chain: list[tuple[AttemptOutcome, int]], bound: int) -> None:
    records = _records([o for o, _ in chain], [d for _, d in chain])
    summary = summarize_attempts(records, max_history=bound)
    assert len(summary.history) == min(len(records), bound)
    assert (summary.omitted or 0) + len(summary.history) == summary.total
