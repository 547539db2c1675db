"""Validator results -> policy decision: every mode, the threshold, errors and advisories."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.core.policy import PolicyDecision, decide
from assay.core.results import ValidatorResult
from assay.core.vocab import PolicyAction, PolicyMode, Severity

_ids = iter(range(1_000_000))


def r(severity: str, *, error: bool = False, advisory: bool = False) -> ValidatorResult:
    return ValidatorResult(
        validator_id=f"{severity}-{next(_ids)}",
        severity=Severity(severity),
        error=error,
        advisory=advisory,
    )


def passes(n: int) -> list[ValidatorResult]:
    return [r("pass") for _ in range(n)]


def warns(n: int) -> list[ValidatorResult]:
    return [r("warn") for _ in range(n)]


@pytest.mark.parametrize("mode", list(PolicyMode))
def test_all_pass_proceeds_in_every_mode(mode: PolicyMode) -> None:
    decision = decide(passes(3), mode)
    assert decision.action is PolicyAction.PROCEED
    assert decision.consensus_achieved
    assert (decision.pass_count, decision.total_count) == (3, 3)


@pytest.mark.parametrize("mode", list(PolicyMode))
def test_any_blocking_block_recovers_in_every_mode(mode: PolicyMode) -> None:
    decision = decide([*passes(4), r("block")], mode)
    assert decision.action is PolicyAction.RECOVER
    assert not decision.consensus_achieved
    assert decision.block_count == 1


@pytest.mark.parametrize("mode", list(PolicyMode))
def test_errors_beat_blocks_in_every_mode(mode: PolicyMode) -> None:
    results = [r("block"), r("pass", error=True), r("pass")]
    decision = decide(results, mode)
    assert decision.action is PolicyAction.HALT
    assert not decision.consensus_achieved
    assert "could not reach a verdict" in decision.justification
    assert results[1].validator_id in decision.justification
    assert decision.error_count == 1


@pytest.mark.parametrize("mode", list(PolicyMode))
def test_an_advisory_validator_that_could_not_run_only_warns(mode: PolicyMode) -> None:
    # `on_fail: warn` never blocks: its tool missing (exit 127), a timeout, a lost model.
    lint = ValidatorResult(validator_id="lint", severity="block", error=True, advisory=True)
    decision = decide([*passes(2), lint], mode)
    assert decision.action is PolicyAction.PROCEED and decision.consensus_achieved
    assert (decision.warn_count, decision.error_count) == (1, 0)
    assert "validator_error" not in decision.justification
    assert "could not run, warned only: lint" in decision.justification
    alone = decide([lint], mode)
    assert alone.action is PolicyAction.PROCEED and alone.warn_count == 1


def test_a_blocking_validator_error_halts_beside_an_advisory_one() -> None:
    results = [*passes(1), r("warn", error=True, advisory=True), r("block", error=True)]
    decision = decide(results, PolicyMode.ANY)
    assert decision.action is PolicyAction.HALT and decision.error_count == 1


@pytest.mark.parametrize(
    ("mode", "n_pass", "n_warn", "met"),
    [
        (PolicyMode.UNANIMOUS, 3, 0, True),
        (PolicyMode.UNANIMOUS, 2, 1, False),
        (PolicyMode.MAJORITY, 2, 1, True),
        (PolicyMode.MAJORITY, 2, 2, False),
        (PolicyMode.MAJORITY, 1, 2, False),
        (PolicyMode.ANY, 1, 4, True),
        (PolicyMode.ANY, 0, 3, False),
        (PolicyMode.QUORUM, 2, 1, False),  # 2/3 = 0.666... < 0.67
        (PolicyMode.QUORUM, 67, 33, True),  # exactly 0.67
        (PolicyMode.QUORUM, 66, 34, False),
        (PolicyMode.QUORUM, 3, 1, True),
    ],
)
def test_consensus_by_mode(mode: PolicyMode, n_pass: int, n_warn: int, met: bool) -> None:
    decision = decide([*passes(n_pass), *warns(n_warn)], mode)
    assert decision.consensus_achieved is met
    assert decision.action is (PolicyAction.PROCEED if met else PolicyAction.RECOVER)
    assert (decision.pass_count, decision.warn_count) == (n_pass, n_warn)
    assert ("not met" in decision.justification) is not met


@pytest.mark.parametrize(
    ("threshold", "n_pass", "n_warn", "met"),
    [
        (0.5, 2, 2, True),
        (0.5, 1, 2, False),
        (0.7, 7, 3, True),  # 0.7 * 10 is 7.000000000000001 in floats; exact arithmetic says met
        (0.75, 3, 1, True),
        (0.76, 3, 1, False),
        (1.0, 4, 0, True),
        (1.0, 3, 1, False),
    ],
)
def test_quorum_threshold_boundary(threshold: float, n_pass: int, n_warn: int, met: bool) -> None:
    decision = decide([*passes(n_pass), *warns(n_warn)], PolicyMode.QUORUM, threshold=threshold)
    assert decision.consensus_achieved is met


@pytest.mark.parametrize("threshold", [0.0, -0.1, 1.01, float("nan")])
def test_threshold_outside_the_unit_interval_is_refused(threshold: float) -> None:
    with pytest.raises(ValueError, match="threshold"):
        decide(passes(1), PolicyMode.QUORUM, threshold=threshold)


def test_advisory_results_are_counted_but_not_toward_consensus() -> None:
    results = [*passes(2), r("warn", advisory=True), r("warn", advisory=True)]
    decision = decide(results, PolicyMode.UNANIMOUS)
    assert decision.action is PolicyAction.PROCEED
    assert decision.consensus_achieved
    assert (decision.pass_count, decision.warn_count, decision.total_count) == (2, 2, 4)
    assert "2 advisory" in decision.justification


def test_advisory_block_is_a_warning_and_cannot_block() -> None:
    decision = decide([*passes(1), r("block", advisory=True)], PolicyMode.UNANIMOUS)
    assert decision.action is PolicyAction.PROCEED
    assert (decision.block_count, decision.warn_count) == (0, 1)


def test_advisory_pass_does_not_make_any_mode_met() -> None:
    decision = decide([r("pass", advisory=True), *warns(1)], PolicyMode.ANY)
    assert decision.action is PolicyAction.RECOVER
    assert decision.pass_count == 1


@pytest.mark.parametrize("mode", list(PolicyMode))
def test_no_blocking_validators_proceeds(mode: PolicyMode) -> None:
    for results in ([], [r("warn", advisory=True), r("block", advisory=True)]):
        decision = decide(results, mode)
        assert decision.action is PolicyAction.PROCEED
        assert decision.consensus_achieved
        assert "no blocking validators" in decision.justification


def test_decision_is_a_frozen_value() -> None:
    decision = decide(passes(1), PolicyMode.UNANIMOUS)
    assert decision == PolicyDecision.model_validate(decision.model_dump(mode="json"))


results_strategy = st.lists(
    st.builds(
        ValidatorResult,
        validator_id=st.sampled_from(["a", "b", "c"]),
        severity=st.sampled_from(list(Severity)),
        error=st.booleans(),
        advisory=st.booleans(),
    ),
    max_size=8,
)


@given(results_strategy, st.sampled_from(list(PolicyMode)))
def test_counts_partition_the_results_and_blocking_errors_always_halt(
    results: list[ValidatorResult], mode: PolicyMode
) -> None:
    decision = decide(results, mode)
    counted = (
        decision.pass_count + decision.warn_count + decision.block_count + decision.error_count
    )
    assert counted == decision.total_count == len(results)
    if any(result.error and not result.advisory for result in results):
        assert decision.action is PolicyAction.HALT
    elif any(result.blocks for result in results):
        assert decision.action is PolicyAction.RECOVER
    assert decision.consensus_achieved is (decision.action is PolicyAction.PROCEED)


def test_mode_may_be_given_as_its_token() -> None:
    decision = decide(passes(1), "any")  # type: ignore[arg-type]
    assert decision.action is PolicyAction.PROCEED
