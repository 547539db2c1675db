"""HaltState.from_json / HaltRearm.from_json: the hand-written validator of state-file halts.

Every field's wrong type and absence is named in one line (``halts[i].<field>: …`` once the
state file adds the index), unknown keys survive a round trip, and the 1.0.0 and 1.1.0 files
we write come back byte for byte.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from assay.core.halt_shape import HaltShapeError
from assay.core.halts import HaltRearm, HaltState, Transitioned, Violation, transition
from assay.core.statefile import HaltStateFile, parse_state_document
from assay.core.vocab import CheckHalt, HaltLifecycle, HaltSeverity

AT = "2026-01-01T00:00:00.000000Z"
LATER = "2026-01-01T00:05:00.000000Z"


def entry(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "halt-scope-breach",
        "severity": "block",
        "lifecycle": "ARMED",
        "evidence": None,
        "armed_at": AT,
        "fired_at": None,
    }
    base.update(changes)
    return base


def rearm_entry(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "cleared": "FIRED",
        "cleared_evidence": {"detail": "out of scope"},
        "cleared_fired_at": AT,
        "rearmed_at": LATER,
        "evidence": {"detail": "reverted"},
    }
    base.update(changes)
    return base


def shape_error(data: object) -> HaltShapeError:
    with pytest.raises(HaltShapeError) as caught:
        HaltState.from_json(data)
    return caught.value


# --- accepted ---------------------------------------------------------------------------------


def test_a_1_0_0_entry_becomes_typed_values() -> None:
    state = HaltState.from_json(entry(lifecycle="FIRED", evidence={"detail": "x"}, fired_at=LATER))
    assert state.severity is HaltSeverity.BLOCK
    assert state.lifecycle is HaltLifecycle.FIRED
    assert state.evidence == {"detail": "x"}
    assert state.fired_at == LATER
    assert state.attested_at is None
    assert state.history == ()
    assert state.extra == ()


def test_absent_optional_fields_take_their_defaults() -> None:
    state = HaltState.from_json(
        {"name": "h", "severity": "log", "lifecycle": "CHECKED", "armed_at": AT}
    )
    assert (state.evidence, state.fired_at, state.attested_at, state.history) == (
        None,
        None,
        None,
        (),
    )
    # ...and are written back as the six 1.0.0 keys, nulls included.
    assert state.to_json() == entry(name="h", severity="log", lifecycle="CHECKED")


def test_a_history_entry_becomes_a_halt_rearm() -> None:
    state = HaltState.from_json(entry(history=[rearm_entry()]))
    assert state.history == (
        HaltRearm(
            cleared=HaltLifecycle.FIRED,
            cleared_evidence={"detail": "out of scope"},
            cleared_fired_at=AT,
            rearmed_at=LATER,
            evidence={"detail": "reverted"},
        ),
    )
    assert state.to_json()["history"] == [rearm_entry()]


def test_the_state_does_not_change_when_the_decoded_document_does() -> None:
    raw = entry(lifecycle="FIRED", evidence={"detail": "x"}, fired_at=AT)
    state = HaltState.from_json(raw)
    raw["evidence"]["detail"] = "rewritten"
    raw["name"] = "other"
    assert state.evidence == {"detail": "x"}
    assert state.name == "halt-scope-breach"


def test_states_are_frozen() -> None:
    state = HaltState.from_json(entry())
    with pytest.raises(AttributeError):
        state.lifecycle = HaltLifecycle.FIRED  # type: ignore[misc]


# --- unknown keys -----------------------------------------------------------------------------


def test_unknown_keys_of_a_halt_are_kept_in_order_and_written_back() -> None:
    raw = entry(zeta={"nested": [1, 2]}, alpha="a")
    state = HaltState.from_json(raw)
    assert state.extra == (("zeta", {"nested": [1, 2]}), ("alpha", "a"))
    assert list(state.to_json()) == [*entry(), "zeta", "alpha"]
    assert state.to_json() == raw


def test_unknown_keys_survive_a_move() -> None:
    state = HaltState.from_json(entry(future="kept"))
    moved = transition(state, HaltLifecycle.FIRED, at=LATER, evidence="why")
    assert isinstance(moved, Transitioned)
    assert moved.state.to_json()["future"] == "kept"
    assert moved.state.lifecycle is HaltLifecycle.FIRED


def test_unknown_keys_of_a_history_entry_are_kept() -> None:
    raw = entry(history=[rearm_entry(operator="ana@host")])
    state = HaltState.from_json(raw)
    assert state.history[0].extra == (("operator", "ana@host"),)
    assert state.to_json() == raw


def test_an_unknown_key_never_overrides_a_known_one() -> None:
    state = HaltState(
        name="h",
        severity=HaltSeverity.WARN,
        lifecycle=HaltLifecycle.ARMED,
        armed_at=AT,
        extra=(("name", "spoofed"),),
    )
    assert state.to_json()["name"] == "h"


# --- refused, one field named -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("name", 3, "should be a string, not a number"),
        ("name", None, "should be a string, not null"),
        ("severity", "fatal", "should be one of 'block', 'warn', 'log', not 'fatal'"),
        ("severity", "BLOCK", "not 'BLOCK'"),
        ("severity", None, "should be one of 'block', 'warn', 'log', not null"),
        ("severity", ["block"], "not a list"),
        ("lifecycle", "EXPLODED", "not 'EXPLODED'"),
        ("lifecycle", "armed", "not 'armed'"),
        ("lifecycle", True, "not a boolean"),
        ("evidence", "text", "should be an object or null, not a string"),
        ("evidence", ["x"], "should be an object or null, not a list"),
        ("armed_at", None, "should be a string, not null"),
        ("armed_at", 1.5, "should be a string, not a number"),
        ("fired_at", 1, "should be a string or null, not a number"),
        ("attested_at", {}, "should be a string or null, not an object"),
        ("history", None, "should be a list, not null"),
        ("history", {"cleared": "FIRED"}, "should be a list, not an object"),
    ],
)
def test_a_wrong_value_names_its_field(field: str, value: object, problem: str) -> None:
    error = shape_error(entry(**{field: value}))
    assert error.where == field
    assert problem in error.problem
    assert str(error) == f"{field}: {error.problem}"


@pytest.mark.parametrize("field", ["name", "severity", "lifecycle", "armed_at"])
def test_a_missing_required_field_is_named(field: str) -> None:
    raw = entry()
    del raw[field]
    error = shape_error(raw)
    assert error.where == field
    assert error.problem.startswith("is missing")


def test_the_first_bad_field_in_declaration_order_is_the_one_reported() -> None:
    error = shape_error(entry(armed_at=None, severity="fatal", fired_at=3))
    assert error.where == "severity"


def test_a_long_bad_value_is_cut_in_the_message() -> None:
    error = shape_error(entry(severity="x" * 5000))
    assert len(str(error)) < 200
    assert "…" in error.problem


@pytest.mark.parametrize(
    ("value", "named"),
    [("halt", "a string"), ([], "a list"), (None, "null"), (7, "a number")],
)
def test_an_entry_that_is_not_an_object_is_refused(value: object, named: str) -> None:
    error = shape_error(value)
    assert error.where == ""
    assert error.problem == f"should be an object, not {named}"


@pytest.mark.parametrize(
    ("changes", "where", "problem"),
    [
        ({"rearmed_at": None}, "history[1].rearmed_at", "should be a string, not null"),
        ({"cleared": "GONE"}, "history[1].cleared", "not 'GONE'"),
        ({"evidence": None}, "history[1].evidence", "should be an object, not null"),
        ({"cleared_evidence": 1}, "history[1].cleared_evidence", "not a number"),
        ({"cleared_fired_at": []}, "history[1].cleared_fired_at", "not a list"),
    ],
)
def test_a_bad_history_entry_names_its_index_and_field(
    changes: dict[str, Any], where: str, problem: str
) -> None:
    error = shape_error(entry(history=[rearm_entry(), rearm_entry(**changes)]))
    assert error.where == where
    assert problem in error.problem


@pytest.mark.parametrize("field", ["cleared", "rearmed_at", "evidence"])
def test_a_history_entry_missing_a_required_field(field: str) -> None:
    bad = rearm_entry()
    del bad[field]
    error = shape_error(entry(history=[bad]))
    assert error.where == f"history[0].{field}"
    assert error.problem.startswith("is missing")


def test_a_history_entry_that_is_not_an_object() -> None:
    error = shape_error(entry(history=["FIRED"]))
    assert (error.where, error.problem) == ("history[0]", "should be an object, not a string")


# --- through the state file -------------------------------------------------------------------


def document(halts: list[dict[str, Any]], version: str = "1.0.0") -> dict[str, Any]:
    return {
        "schema_version": version,
        "dispatch_id": "d-1",
        "contract_path": "/repo/contract.yaml",
        "armed_at": AT,
        "halts": halts,
        "canonical_halt_count": 1,
        "per_dispatch_addition_count": len(halts) - 1,
    }


def test_the_state_file_prefixes_the_halt_index() -> None:
    doc = document([entry(), entry(name="halt-own", severity="fatal")])
    found = parse_state_document(doc)
    assert isinstance(found, Violation)
    assert found.halt_class == CheckHalt.STATE_CONSTRUCTION_FAILURE.value
    assert found.detail == "halts[1].severity: should be one of 'block', 'warn', 'log', not 'fatal'"


def test_the_state_file_names_a_non_object_entry_by_its_index() -> None:
    found = parse_state_document(document([entry(), "halt-own"]))
    assert isinstance(found, Violation)
    assert found.detail == "halts[1]: should be an object, not a string"


def test_the_state_file_names_a_bad_history_field_by_both_indexes() -> None:
    doc = document([entry(), entry(name="h2", history=[rearm_entry(rearmed_at=5)])], "1.1.0")
    found = parse_state_document(doc)
    assert isinstance(found, Violation)
    assert found.detail == "halts[1].history[0].rearmed_at: should be a string, not a number"


V1_0 = document(
    [
        entry(),
        entry(
            name="halt-budget-exhausted",
            severity="warn",
            lifecycle="FIRED",
            evidence={"detail": "spent ü"},
            fired_at=LATER,
        ),
    ]
)
V1_1 = document(
    [
        entry(lifecycle="ATTESTED", attested_at=LATER),
        entry(name="halt-own", severity="log", history=[rearm_entry(), rearm_entry()]),
    ],
    "1.1.0",
)


@pytest.mark.parametrize("doc", [V1_0, V1_1], ids=["1.0.0", "1.1.0"])
def test_files_we_write_come_back_byte_for_byte(doc: dict[str, Any]) -> None:
    written = json.dumps(doc, indent=2) + "\n"
    parsed = parse_state_document(json.loads(written))
    assert isinstance(parsed, HaltStateFile)
    assert json.dumps(parsed.to_json(), indent=2) + "\n" == written
    assert parsed.schema_version == doc["schema_version"]


def test_a_newer_writers_keys_at_every_level_come_back() -> None:
    doc = copy.deepcopy(V1_1)
    doc["schema_version"] = "1.4.0"
    doc["top_new"] = [1]
    doc["halts"][0]["halt_new"] = {"a": None}
    doc["halts"][1]["history"][1]["rearm_new"] = "x"
    parsed = parse_state_document(doc)
    assert isinstance(parsed, HaltStateFile)
    assert parsed.to_json() == doc
    assert list(parsed.to_json()["halts"][1]["history"][1])[-1] == "rearm_new"
