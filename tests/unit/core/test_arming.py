"""arm_halts(): a parsed contract's halt_classes -> armed halts, or every reason it cannot."""

from __future__ import annotations

from typing import Any

import pytest

from assay.core.arming import ArmedHalts, Violation, arm_halts
from assay.core.halts import CANONICAL_HALTS
from assay.core.vocab import ArmHalt, HaltLifecycle, HaltSeverity

AT = "2026-03-04T05:06:07.000000Z"


def canonical_entries() -> list[dict[str, Any]]:
    return [{"name": name.value, "severity": sev.value} for name, sev in CANONICAL_HALTS.items()]


def armed(contract: object) -> ArmedHalts:
    result = arm_halts(contract, at=AT)
    assert isinstance(result, ArmedHalts), result
    return result


def violations(contract: object) -> list[Violation]:
    result = arm_halts(contract, at=AT)
    assert isinstance(result, list), result
    assert result, "a refusal must name at least one violation"
    for v in result:
        assert v.severity is HaltSeverity.BLOCK
        assert v.detail
    return result


def classes(result: list[Violation]) -> list[str]:
    return [v.halt_class for v in result]


def test_the_seven_canonical_halts_arm() -> None:
    result = armed({"halt_classes": canonical_entries()})
    assert result.canonical_halt_count == 7
    assert result.per_dispatch_addition_count == 0
    assert [h.name for h in result.halts] == [n.value for n in CANONICAL_HALTS]
    for halt in result.halts:
        assert halt.lifecycle is HaltLifecycle.ARMED
        assert halt.armed_at == AT
        assert halt.evidence is None
        assert halt.fired_at is None
        assert halt.severity is CANONICAL_HALTS[halt.name]  # type: ignore[index]


def test_additions_are_counted_and_contract_order_is_kept() -> None:
    entries = canonical_entries()
    entries.insert(0, {"name": "halt-task-first", "severity": "log"})
    entries.insert(4, {"name": "halt-task-middle", "severity": "block"})
    entries.append({"name": "halt-task-last", "severity": "warn"})
    entries.reverse()
    result = armed({"task": "x", "halt_classes": entries, "seats": 2})
    assert [h.name for h in result.halts] == [e["name"] for e in entries]
    assert [h.severity.value for h in result.halts] == [e["severity"] for e in entries]
    assert result.canonical_halt_count == 7
    assert result.per_dispatch_addition_count == 3


@pytest.mark.parametrize(
    "contract",
    [{}, {"task": "x"}, {"halt_classes": None}, {"halt_classes": "all"}, {"halt_classes": {}}],
)
def test_missing_or_non_list_halt_classes(contract: dict[str, Any]) -> None:
    result = violations(contract)
    assert classes(result) == [ArmHalt.HALT_CLASSES_MISSING.value]
    assert "halt_classes" in result[0].detail


@pytest.mark.parametrize("contract", [None, [], ["halt_classes"], "halt_classes: []", 7])
def test_non_mapping_contract(contract: object) -> None:
    result = violations(contract)
    assert classes(result) == [ArmHalt.CONTRACT_YAML_MALFORMED.value]
    assert type(contract).__name__ in result[0].detail


@pytest.mark.parametrize("severity", ["fatal", "BLOCK", "", None, 1, "pass"])
def test_bad_severity_is_a_construction_failure(severity: object) -> None:
    entries = canonical_entries()
    entries.append({"name": "halt-task-own", "severity": severity})
    result = violations({"halt_classes": entries})
    assert classes(result) == [ArmHalt.STATE_CONSTRUCTION_FAILURE.value]
    assert "halt_classes[7]" in result[0].detail
    assert "halt-task-own" in result[0].detail


@pytest.mark.parametrize(
    "entry",
    [
        "halt-task-own",
        ["halt-task-own", "block"],
        {"severity": "block"},
        {"name": "", "severity": "block"},
        {"name": "   ", "severity": "block"},
        {"name": 3, "severity": "block"},
        {"name": "halt-task-own", "severity": "block", "owner": "me"},
    ],
)
def test_unusable_entries_are_construction_failures(entry: object) -> None:
    entries = [*canonical_entries(), entry]
    result = violations({"halt_classes": entries})
    assert classes(result) == [ArmHalt.STATE_CONSTRUCTION_FAILURE.value]
    assert "halt_classes[7]" in result[0].detail


def test_a_halt_named_twice_is_a_construction_failure() -> None:
    entries = [*canonical_entries(), {"name": "halt-scope-breach", "severity": "block"}]
    result = violations({"halt_classes": entries})
    assert classes(result) == [ArmHalt.STATE_CONSTRUCTION_FAILURE.value]
    assert "halt-scope-breach" in result[0].detail
    assert "twice" in result[0].detail


def test_every_bad_entry_is_reported() -> None:
    entries = [
        *canonical_entries(),
        {"name": "halt-a", "severity": "fatal"},
        {"name": "halt-b", "severity": "nope"},
    ]
    result = violations({"halt_classes": entries})
    assert classes(result) == [ArmHalt.STATE_CONSTRUCTION_FAILURE.value] * 2
    assert "halt-a" in result[0].detail
    assert "halt-b" in result[1].detail


def test_a_missing_canonical_halt_is_incomplete() -> None:
    entries = [e for e in canonical_entries() if e["name"] != "halt-secret-exposure"]
    result = violations({"halt_classes": entries})
    assert classes(result) == [ArmHalt.CANONICAL_HALT_INCOMPLETE.value]
    assert "halt-secret-exposure" in result[0].detail


def test_an_empty_list_misses_all_seven() -> None:
    result = violations({"halt_classes": []})
    assert classes(result) == [ArmHalt.CANONICAL_HALT_INCOMPLETE.value] * 7
    for name, violation in zip(CANONICAL_HALTS, result, strict=True):
        assert name.value in violation.detail


@pytest.mark.parametrize(
    ("name", "lowered"),
    [
        ("halt-scope-breach", "warn"),
        ("halt-irreversible-action", "log"),
        ("halt-budget-exhausted", "log"),
        ("halt-verification-gap", "log"),
    ],
)
def test_a_canonical_halt_with_a_lower_severity_is_incomplete(name: str, lowered: str) -> None:
    entries = canonical_entries()
    for entry in entries:
        if entry["name"] == name:
            entry["severity"] = lowered
    result = violations({"halt_classes": entries})
    assert classes(result) == [ArmHalt.CANONICAL_HALT_INCOMPLETE.value]
    assert name in result[0].detail
    assert lowered in result[0].detail


@pytest.mark.parametrize("name", ["halt-budget-exhausted", "halt-verification-gap"])
def test_raising_a_canonical_warn_halt_to_block_is_allowed(name: str) -> None:
    entries = canonical_entries()
    for entry in entries:
        if entry["name"] == name:
            entry["severity"] = "block"
    result = armed({"halt_classes": entries})
    by_name = {h.name: h for h in result.halts}
    assert by_name[name].severity is HaltSeverity.BLOCK
    assert result.canonical_halt_count == 7


def test_violation_json_shape() -> None:
    violation = violations({})[0]
    assert violation.to_json() == {
        "halt_class": "halt-halt-classes-missing",
        "severity": "block",
        "detail": "contract has no `halt_classes:` field (or non-list value)",
    }
