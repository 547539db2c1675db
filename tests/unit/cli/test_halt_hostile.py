"""Hostile state files and contracts give the malformed-state failure, never a traceback."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.cli import halt
from assay.core.statefile import nesting_depth_exceeds, parse_state_document

if TYPE_CHECKING:
    from support.cli_fixtures import Armed, Assay

MALFORMED = "halt-check-state-file-malformed"
STATE_KEYS = [
    "schema_version", "dispatch_id", "contract_path", "armed_at", "halts",
    "canonical_halt_count", "per_dispatch_addition_count", "newer_key",
]  # fmt: skip
HALT_KEYS = ["name", "severity", "lifecycle", "armed_at", "evidence", "history", "fired_at"]
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
    assay_main: Assay, armed: Armed, command: list[str], where: str
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
    ran = assay_main("halt", *command, *armed.flags())
    assert ran.code == 1, ran
    assert "Traceback" not in ran.stderr and "RecursionError" not in ran.stderr
    assert [v["halt_class"] for v in ran.doc["violations"]] == [MALFORMED]
    assert armed.state_file.read_bytes() == before  # nothing written


def test_a_contract_nested_too_deeply_is_refused_at_arm(assay_main: Assay, tmp_path: Path) -> None:
    contract = tmp_path / "deep.yaml"
    contract.write_text("task: x\nenv: " + _nested(5000) + "\n")
    ran = assay_main("halt", "arm", "--contract", str(contract), "--dispatch-id", "d-9")
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


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)


@settings(
    max_examples=40,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    mutation=st.one_of(
        st.binary(max_size=64).map(lambda raw: ("bytes", raw)),
        st.tuples(st.sampled_from(STATE_KEYS), JSONISH).map(lambda kv: ("key", kv)),
        st.tuples(st.sampled_from(HALT_KEYS), JSONISH).map(lambda kv: ("halt", kv)),
    ),
    command=st.sampled_from(COMMANDS),
)
def test_a_random_state_file_gives_a_documented_answer(
    armed: Armed, mutation: tuple[str, Any], command: list[str]
) -> None:
    # The fixture is shared by every example: start each from the file as armed.
    pristine = armed.state_file.with_name("pristine.json")
    if not pristine.exists():
        pristine.write_bytes(armed.state_file.read_bytes())
    doc = json.loads(pristine.read_text())
    kind, change = mutation
    if kind == "bytes":
        raw = change
    else:
        key, value = change
        (doc if kind == "key" else doc["halts"][0])[key] = value
        raw = json.dumps(doc).encode()
    armed.state_file.write_bytes(raw)
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = halt.run([*command, *armed.flags()])
    assert code in (0, 1), err.getvalue()
    document = json.loads(out.getvalue())
    assert isinstance(document, dict) and "Traceback" not in err.getvalue()
    if code == 1 and document.get("violations"):
        assert all(v["halt_class"].startswith("halt-") for v in document["violations"])
