"""Fuzzed contracts and state files: the parsers answer with their own error types, never
anything else (no RecursionError, no UnicodeError, no pydantic or YAML exception)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.core.contract import Contract, ContractError, parse_contract
from assay.core.halts import Violation
from assay.core.statefile import HaltStateFile, parse_state_document

FAST = settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])

KEYS = [
    "task", "anchors", "scope", "coder", "seats", "judges", "judge", "validators", "policy",
    "budgets", "land", "env", "halt_classes", "kind", "max_attempts", "id", "run", "name",
    "severity", "allow", "protect", "model", "api_key_env", "timeout_seconds",
]  # fmt: skip
TEXT = st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from("\x00\ud800:{}[]-#'\""))
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), TEXT, st.sampled_from(KEYS)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | TEXT, inner, max_size=4)
    ),
    max_leaves=20,
)


def _yaml_scalar(value: Any) -> str:
    return json.dumps(value)  # JSON is YAML; json.dumps escapes surrogates as \ud800


@FAST
@given(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=6))
def test_a_random_contract_document_parses_or_is_a_contract_error(doc: dict[str, Any]) -> None:
    text = "\n".join(f"{key}: {_yaml_scalar(value)}" for key, value in doc.items())
    try:
        parsed = parse_contract(text, "fuzz.yaml")
    except ContractError as exc:
        assert str(exc).startswith("fuzz.yaml")
    else:
        assert isinstance(parsed, Contract)


@FAST
@given(
    st.text(
        alphabet=st.characters(codec="utf-8") | st.sampled_from("\x00\t\n:{}[]-#&*!|>'\"%@`"),
        max_size=200,
    )
)
def test_random_yaml_text_parses_or_is_a_contract_error(text: str) -> None:
    with contextlib.suppress(ContractError):
        parse_contract(text, "fuzz.yaml")


@settings(max_examples=12)
@given(
    st.integers(min_value=1, max_value=60) | st.integers(min_value=900, max_value=1500),
    st.sampled_from(["[", "{a: ", "- "]),
)
def test_deeply_nested_yaml_is_a_contract_error(depth: int, opener: str) -> None:
    closer = {"[": "]", "{a: ": "}", "- ": ""}[opener]
    body = opener * depth + "1" + closer * depth
    text = f"task: x\nenv: {body}" if opener != "- " else "task: x\nenv:\n" + body
    with contextlib.suppress(ContractError):
        parse_contract(text, "fuzz.yaml")


STATE = st.fixed_dictionaries(
    {},
    optional={
        "schema_version": st.sampled_from(["1.0.0", "1.1.0", "2.0.0", "1"]) | TEXT,
        "dispatch_id": TEXT | st.integers(),
        "contract_path": TEXT,
        "armed_at": TEXT,
        "canonical_halt_count": st.integers() | st.booleans(),
        "per_dispatch_addition_count": st.integers() | st.booleans(),
        "halts": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "name": st.sampled_from(["halt-scope-breach", "x"]) | TEXT,
                    "severity": st.sampled_from(["block", "warn", "log", "nope"]),
                    "lifecycle": st.sampled_from(["ARMED", "CHECKED", "FIRED", "ATTESTED", "?"]),
                    "armed_at": TEXT,
                    "evidence": VALUES,
                    "history": VALUES,
                },
            )
            | VALUES,
            max_size=4,
        )
        | VALUES,
        "extra": VALUES,
    },
)


@FAST
@given(STATE | VALUES)
def test_a_random_state_document_is_a_state_or_a_violation(doc: Any) -> None:
    parsed = parse_state_document(doc)
    assert isinstance(parsed, HaltStateFile | Violation)
    if isinstance(parsed, HaltStateFile):
        json.dumps(parsed.to_json())  # what was accepted can be written back
