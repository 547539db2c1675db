"""Hostile state files and contracts give the malformed-state failure, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from assay.core.statefile import nesting_depth_exceeds, parse_state_document

if TYPE_CHECKING:
    from conftest import Armed, Assay

MALFORMED = "halt-check-state-file-malformed"
COMMANDS = [
    ["check", "--condition", "halt-scope-breach"],
    ["check", "--condition", "halt-scope-breach", "--fire", "--evidence", "x"],
    ["attest"],
    ["rearm", "--condition", "halt-scope-breach", "--evidence", "fixed"],
]


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize("where", ["top", "evidence", "extra-key"])
def test_a_state_file_nested_1000_deep_is_malformed_not_a_traceback(
    assay: Assay, armed: Armed, command: list[str], where: str
) -> None:
    doc = armed.load()
    if where == "top":
        text = _nested(1000)
    else:
        if where == "evidence":
            doc["halts"][0]["evidence"] = "@@"
        else:
            doc["newer_key"] = "@@"
        text = json.dumps(doc).replace('"@@"', _nested(1000))
    armed.state_file.write_text(text)
    before = armed.state_file.read_bytes()
    ran = assay("halt", *command, *armed.flags())
    assert ran.code == 1, ran
    assert "Traceback" not in ran.stderr and "RecursionError" not in ran.stderr
    assert [v["halt_class"] for v in ran.doc["violations"]] == [MALFORMED]
    assert armed.state_file.read_bytes() == before  # nothing written


def test_a_contract_nested_too_deeply_is_refused_at_arm(assay: Assay, tmp_path: Path) -> None:
    contract = tmp_path / "deep.yaml"
    contract.write_text("task: x\nenv: " + _nested(5000) + "\n")
    ran = assay("halt", "arm", "--contract", str(contract), "--dispatch-id", "d-9")
    assert ran.code == 1, ran
    assert "Traceback" not in ran.stderr
    assert ran.doc["violations"][0]["halt_class"] == "halt-contract-yaml-malformed"
    assert "nested too deeply" in ran.doc["violations"][0]["detail"]


def test_depth_is_measured_without_recursion() -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    assert nesting_depth_exceeds(deep)
    assert not nesting_depth_exceeds({"a": [1, {"b": []}]})
    assert parse_state_document({"schema_version": "1.0.0", "halts": deep}).detail == (  # type: ignore[union-attr]
        "the document is nested more than 64 levels deep"
    )
