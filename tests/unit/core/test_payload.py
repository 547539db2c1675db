"""The halt payload: what build_payload assembles, and the committed JSON Schema."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.core.attempts import AttemptRecord
from assay.core.changes import TypeChange
from assay.core.payload import (
    CandidateSummary,
    HaltNotice,
    LandSummary,
    Payload,
    Usage,
    build_payload,
    payload_json_schema,
    usage_of,
)
from assay.core.policy import decide
from assay.core.report import CoderReport, compare_with_diff, parse_coder_report
from assay.core.results import ValidatorResult
from assay.core.tally import tally
from assay.core.usage import Spend, UsageFigures
from assay.core.vocab import (
    AttemptOutcome,
    EntryType,
    HaltSeverity,
    HaltType,
    LandMode,
    PolicyMode,
    RunStatus,
    Severity,
    TaskStatus,
)

SCHEMA_FILE = Path(__file__).resolve().parents[3] / "schemas" / "payload.schema.json"
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def committed_schema() -> dict[str, object]:
    return json.loads(SCHEMA_FILE.read_text())


def validate(document: dict[str, object]) -> None:
    jsonschema.validate(document, committed_schema())


def records(n: int) -> list[AttemptRecord]:
    outcomes = [AttemptOutcome.BLOCKED] * (n - 1) + [AttemptOutcome.PASSED]
    return [
        AttemptRecord(attempt=i + 1, outcome=o, coder_dispatches=2) for i, o in enumerate(outcomes)
    ]


def payload(n_attempts: int = 1, **overrides: object) -> Payload:
    results = [ValidatorResult(validator_id="tests", severity=Severity.PASS)]
    report = parse_coder_report(
        {"summary": "fixed", "files": [{"path": "a.py", "kind": "modified"}], "turns_used": 3}
    )
    args: dict[str, object] = {
        "task_id": "t1",
        "run_id": "r1",
        "dispatch_id": "r1-a1-s1",
        "status": RunStatus.MERGED,
        "halt_type": HaltType.NONE,
        "reason": "validators passed",
        "task_status": TaskStatus.DONE,
        "attempt_spent": True,
        "task_spec": "fix it",
        "attempts": records(n_attempts),
        "started_at": T0,
        "finished_at": T0 + timedelta(seconds=5),
        "validator_results": results,
        "policy_decision": decide(results, PolicyMode.UNANIMOUS),
        "candidates": [
            CandidateSummary(seat=1, label="A", coder="replay", files_changed=["b.py"], viable=True)
        ],
        "tally": tally(["A"], judges=0, rankings=[], seed="r1"),
        "coder_report": report,
        "report_comparison": compare_with_diff(report, ["b.py"]),
        "fired_halts": [
            HaltNotice(name="halt-budget-exhausted", severity=HaltSeverity.WARN, detail="turns")
        ],
        "usage": Usage(tokens=1200, cost_usd=0.02, wall_time_ms=5000),
    }
    args.update(overrides)
    return build_payload(**args)  # type: ignore[arg-type]


def test_committed_schema_is_current() -> None:
    assert committed_schema() == payload_json_schema(), (
        "schemas/payload.schema.json is stale: "
        "run `assay payload schema > schemas/payload.schema.json`"
    )


def test_payload_validates_and_carries_the_design_keys() -> None:
    doc = payload().to_json()
    validate(doc)
    assert doc["schema"] == "assay.payload/1"
    assert set(doc) == {
        "schema", "task_id", "run_id", "dispatch_id", "status", "halt_type", "reason",
        "task_status", "attempt_spent", "task_spec", "validator_results", "policy_decision",
        "attempts", "candidates", "tally", "coder_report", "halts", "usage", "land",
        "sandbox", "network", "started_at", "finished_at",
    }  # fmt: skip
    assert doc["land"] is None
    assert doc["sandbox"] == "none"  # unless told, a payload never claims a confinement
    assert doc["coder_report"]["source"] == "coder"
    assert doc["coder_report"]["evidence_only"] is True
    assert doc["coder_report"]["claimed_but_missing"] == ["a.py"]
    assert doc["coder_report"]["unclaimed_but_present"] == ["b.py"]
    assert doc["halts"]["fired"] == []
    assert [w["name"] for w in doc["halts"]["warnings"]] == ["halt-budget-exhausted"]


def test_a_pull_request_left_by_the_run_is_in_the_land_block() -> None:
    land = LandSummary(mode=LandMode.PR, branch="assay/r1/seat-1", pr_url="https://gh/o/r/pull/7")
    doc = payload(land=land).to_json()
    validate(doc)
    assert doc["land"] == {
        "mode": "pr",
        "branch": "assay/r1/seat-1",
        "pr_url": "https://gh/o/r/pull/7",
    }


def test_clean_and_hard_won_passes_look_different() -> None:
    clean, hard = payload(1).to_json(), payload(4).to_json()
    assert clean["attempts"] == {
        "total": 1,
        "coder_dispatches": 2,
        "history": [{"attempt": 1, "outcome": "passed"}],
    }
    assert hard["attempts"]["total"] == 4
    assert [h["outcome"] for h in hard["attempts"]["history"]] == [
        "blocked",
        "blocked",
        "blocked",
        "passed",
    ]


@given(st.integers(min_value=1, max_value=60))
def test_history_is_bounded_and_omitted_only_when_cut(n: int) -> None:
    doc = payload(n).to_json()
    validate(doc)
    attempts = doc["attempts"]
    assert attempts["total"] == n
    assert attempts["coder_dispatches"] == 2 * n
    assert len(attempts["history"]) == min(n, 20)
    assert attempts["history"][-1]["attempt"] == n
    if n > 20:
        assert attempts["omitted"] == n - 20
    else:
        assert "omitted" not in attempts


def test_no_report_means_null_and_still_valid() -> None:
    doc = payload(coder_report=None, report_comparison=None, tally=None).to_json()
    validate(doc)
    assert doc["coder_report"] is None
    assert doc["tally"] is None


def test_block_halts_go_to_fired() -> None:
    fired = [HaltNotice(name="halt-scope-breach", severity=HaltSeverity.BLOCK, detail=".github")]
    doc = payload(
        status=RunStatus.BLOCKED,
        halt_type=HaltType.ESCALATE,
        task_status=TaskStatus.HELD,
        fired_halts=fired,
    ).to_json()
    validate(doc)
    assert [h["name"] for h in doc["halts"]["fired"]] == ["halt-scope-breach"]


def test_non_terminal_status_is_refused() -> None:
    with pytest.raises(ValueError, match="terminal"):
        payload(status=RunStatus.VALIDATING)


def test_finished_before_started_is_refused() -> None:
    with pytest.raises(ValueError, match="before"):
        payload(finished_at=T0 - timedelta(seconds=1))


def test_round_trip_ignores_unknown_keys() -> None:
    doc = payload().to_json()
    doc["added_in_a_later_version"] = {"x": 1}
    again = Payload.model_validate(doc)
    assert again.to_json() == payload().to_json()


def test_schema_rejects_a_bad_status() -> None:
    doc = payload().to_json()
    doc["status"] = "kinda_merged"
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)


def test_report_type_stays_evidence_only() -> None:
    assert not {"passed", "verdict", "severity", "ok"} & set(CoderReport.model_fields)


def test_an_unknown_cost_makes_the_total_unknown_and_is_counted() -> None:
    spend = Spend.of(
        [
            UsageFigures(tokens_in=60, tokens_out=40, cost_usd=0.25),
            UsageFigures(reported=False),
            UsageFigures(tokens_in=50, cost_usd=0.5),
            UsageFigures(tokens_in=7),
        ]
    )
    usage = usage_of(spend, 60)
    assert usage.cost_usd is None
    assert (usage.unpriced_dispatches, usage.unreported_dispatches) == (1, 1)
    assert usage.priced_cost_usd == 0.75
    assert (usage.tokens, usage.tokens_in, usage.tokens_out) == (157, 117, 40)
    assert (usage.dispatches, usage.wall_time_ms) == (4, 60)


def test_every_cost_known_gives_the_total_and_no_unpriced_dispatch() -> None:
    spend = Spend.of([UsageFigures(tokens_in=1, cost_usd=0.1), UsageFigures(cost_usd=0.0)])
    usage = usage_of(spend, 10)
    assert usage.cost_usd == usage.priced_cost_usd == 0.1
    assert usage.unpriced_dispatches == 0
    assert usage_of(Spend(), 0).cost_usd == 0.0  # nothing dispatched: nothing spent


def test_a_candidates_type_changes_are_in_the_payload_and_checked_by_the_schema() -> None:
    change = TypeChange(path="lib/x.py", before=EntryType.SYMLINK, after=EntryType.FILE)
    seat = CandidateSummary(seat=1, coder="command", viable=True, type_changes=[change])
    doc = payload(candidates=[seat]).to_json()
    validate(doc)
    assert doc["candidates"][0]["type_changes"] == [
        {"path": "lib/x.py", "before": "symlink", "after": "file"}
    ]
    assert Payload.model_validate(doc).candidates[0].type_changes == [change]
    doc["candidates"][0]["type_changes"][0]["after"] = "hardlink"
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)


def test_a_payload_written_before_type_changes_existed_still_reads() -> None:
    doc = payload().to_json()
    assert doc["candidates"][0]["type_changes"] == []
    del doc["candidates"][0]["type_changes"]
    validate(doc)
    assert Payload.model_validate(doc).candidates[0].type_changes == []
