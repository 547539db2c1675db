"""ValidatorResult: the shape of a validator's verdict, and how advisory blocks are read."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from assay.core.results import ValidatorResult
from assay.core.vocab import Severity


def test_defaults_follow_the_design_shape() -> None:
    result = ValidatorResult(validator_id="tests", severity=Severity.PASS)
    assert result.model_dump(mode="json") == {
        "validator_id": "tests",
        "severity": "pass",
        "error": False,
        "justification": "",
        "findings": [],
        "advisory": False,
    }


def test_advisory_block_only_warns() -> None:
    result = ValidatorResult(validator_id="lint", severity=Severity.BLOCK, advisory=True)
    assert result.effective_severity is Severity.WARN
    assert not result.blocks


def test_an_advisory_error_warns_and_never_halts() -> None:
    result = ValidatorResult(validator_id="lint", severity=Severity.BLOCK, error=True)
    assert result.halts and not result.blocks
    advisory = result.as_advisory()
    assert advisory.error and advisory.advisory and not advisory.halts and not advisory.blocks
    assert advisory.severity is advisory.effective_severity is Severity.WARN
    # as the adapter would have recorded it, an error of an advisory validator warns too
    raw = ValidatorResult(validator_id="lint", severity=Severity.BLOCK, error=True, advisory=True)
    assert raw.effective_severity is Severity.WARN and not raw.halts


@pytest.mark.parametrize("severity", list(Severity))
def test_as_advisory_never_leaves_a_block(severity: Severity) -> None:
    result = ValidatorResult(validator_id="v", severity=severity).as_advisory()
    assert result.advisory and result.severity is not Severity.BLOCK
    assert result.severity is (Severity.WARN if severity is Severity.BLOCK else severity)
    assert result.as_advisory() is result


def test_blocking_block_blocks_and_error_never_does() -> None:
    assert ValidatorResult(validator_id="t", severity=Severity.BLOCK).blocks
    errored = ValidatorResult(validator_id="t", severity=Severity.BLOCK, error=True)
    assert not errored.blocks


def test_is_frozen_and_reads_back_unknown_keys() -> None:
    result = ValidatorResult.model_validate(
        {"validator_id": "t", "severity": "warn", "added_later": 1}
    )
    assert result.severity is Severity.WARN
    with pytest.raises(ValidationError):
        result.severity = Severity.PASS  # type: ignore[misc]


def test_rejects_unknown_severity_and_empty_id() -> None:
    with pytest.raises(ValidationError):
        ValidatorResult.model_validate({"validator_id": "t", "severity": "abstain"})
    with pytest.raises(ValidationError):
        ValidatorResult(validator_id="", severity=Severity.PASS)
