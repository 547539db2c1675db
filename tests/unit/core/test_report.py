"""The coder report: optional evidence, parsed best-effort, never a verdict (seed 001)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.core.report import (
    CoderReport,
    DiffComparison,
    FileChange,
    compare_with_diff,
    parse_coder_report,
    read_coder_report,
)
from assay.core.vocab import FileChangeKind, StopReason

LOGGER = "assay.report"
FULL = {
    "files": [
        {"path": "src/slug.py", "kind": "modified"},
        {"path": "tests/test_slug.py", "kind": "created"},
    ],
    "summary": "digits kept",
    "turns_used": 12,
    "turns_available": 40,
    "tokens_used": 51234,
    "context_window": 200000,
    "wall_time_ms": 93000,
    "cost_usd": 0.42,
    "stop_reason": "completed",
}


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def warnings_seen() -> Iterator[list[logging.LogRecord]]:
    handler = _Collect()
    logger = logging.getLogger(LOGGER)
    logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)


def _parse_counting(raw: Any) -> tuple[CoderReport | None, list[str]]:
    """Parse and return the warnings the parser logged, without a function-scoped fixture."""
    handler = _Collect()
    logger = logging.getLogger(LOGGER)
    logger.addHandler(handler)
    try:
        report = parse_coder_report(raw)
    finally:
        logger.removeHandler(handler)
    return report, [r.getMessage() for r in handler.records if r.levelno == logging.WARNING]


# The shape carries no verdict.

VERDICT_BEARING = {"passed", "severity", "status", "verdict", "halt", "ok", "success"}


def test_report_type_has_no_verdict_bearing_field() -> None:
    assert not VERDICT_BEARING & set(CoderReport.model_fields)
    assert not any(
        word in field for field in CoderReport.model_fields for word in ("pass", "verdict")
    )


def test_every_field_is_optional_and_an_empty_report_is_valid() -> None:
    assert all(not field.is_required() for field in CoderReport.model_fields.values())
    assert CoderReport() == CoderReport.model_validate({})
    assert parse_coder_report("{}") == CoderReport()


def test_docstring_states_both_invariants() -> None:
    doc = " ".join((CoderReport.__doc__ or "").split())
    assert "The worktree is the only authority on what was written" in doc
    assert "Nothing a coder reports can cause a pass" in doc


def test_stop_reason_enum_and_runtime_set_agree() -> None:
    accepted = {
        reason
        for reason in [*(r.value for r in StopReason), "timeout", "no_changes", "error", "unknown"]
        if (report := parse_coder_report({"stop_reason": reason})) is not None
        and report.stop_reason is not None
    }
    assert accepted == {r.value for r in StopReason}
    assert CoderReport.model_fields["stop_reason"].annotation == StopReason | None


def test_stop_reason_tokens_are_the_five_of_the_seed() -> None:
    assert [r.value for r in StopReason] == [
        "completed",
        "turn_budget",
        "context_budget",
        "provider_fault",
        "abandoned",
    ]


# Parsing well-formed input.


@pytest.mark.parametrize("encode", [json.dumps, lambda d: json.dumps(d).encode(), dict])
def test_full_report_parses_from_text_bytes_and_mapping(
    encode: Any, warnings_seen: list[logging.LogRecord]
) -> None:
    report = parse_coder_report(encode(FULL))
    assert report is not None
    assert report.stop_reason is StopReason.COMPLETED
    assert report.files == [
        FileChange(path="src/slug.py", kind=FileChangeKind.MODIFIED),
        FileChange(path="tests/test_slug.py", kind=FileChangeKind.CREATED),
    ]
    assert report.cost_usd == 0.42
    assert warnings_seen == []


def test_utf8_bom_is_accepted_in_bytes() -> None:
    assert parse_coder_report(b"\xef\xbb\xbf{}") == CoderReport()


def test_integer_cost_is_a_number() -> None:
    report = parse_coder_report({"cost_usd": 1})
    assert report is not None
    assert report.cost_usd == 1.0


@pytest.mark.parametrize("raw", [None, "", "   \n", b"", b"  "])
def test_absent_or_empty_report_is_none_without_warning(
    raw: Any, warnings_seen: list[logging.LogRecord]
) -> None:
    assert parse_coder_report(raw) is None
    assert warnings_seen == []


# Discarding malformed input: None and exactly one warning naming why.


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("{not json", "not valid JSON"),
        (b"\xff\xfe\x00", "not UTF-8"),
        ("[1, 2]", "expected a JSON object, got array"),
        ("null", "expected a JSON object, got null"),
        ('"completed"', "expected a JSON object, got string"),
        ("3", "expected a JSON object, got number"),
        ('{"verdict": "pass"}', "unknown key 'verdict'"),
        ('{"files": [{"path": "a", "kind": "created", "mode": 1}]}', "unknown key 'files[0].mode'"),
        ('{"stop_reason": "timeout"}', "unknown stop reason 'timeout'"),
        ('{"stop_reason": "COMPLETED"}', "unknown stop reason 'COMPLETED'"),
        ('{"files": [{"path": "a", "kind": "renamed"}]}', "unknown file change kind 'renamed'"),
        ('{"turns_used": "12"}', "wrong type or value for 'turns_used'"),
        ('{"turns_used": true}', "wrong type or value for 'turns_used'"),
        ('{"turns_used": 1.5}', "wrong type or value for 'turns_used'"),
        ('{"tokens_used": -1}', "wrong type or value for 'tokens_used'"),
        ('{"cost_usd": NaN}', "wrong type or value for 'cost_usd'"),
        ('{"summary": 5}', "wrong type or value for 'summary'"),
        ('{"files": "src/a.py"}', "wrong type or value for 'files'"),
        ('{"files": [{"path": "", "kind": "created"}]}', "files[0].path"),
        ({1: "x"}, "is not a string"),
        (42, "expected JSON text, bytes or a mapping, got int"),
        ("[" * 100_000, "could not be read"),
    ],
)
def test_malformed_report_is_discarded_with_one_warning(raw: Any, why: str) -> None:
    report, warnings = _parse_counting(raw)
    assert report is None
    assert len(warnings) == 1
    assert why in warnings[0]


def test_many_problems_still_make_one_warning() -> None:
    raw = {"a": 1, "b": 2, "c": 3, "d": 4, "stop_reason": "nope"}
    report, warnings = _parse_counting(raw)
    assert report is None
    assert len(warnings) == 1
    assert "more" in warnings[0]


def test_caplog_sees_one_warning_on_the_report_logger(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert parse_coder_report('{"stop_reason": "gave_up"}') is None
    assert [(r.name, r.levelno) for r in caplog.records] == [(LOGGER, logging.WARNING)]
    assert "gave_up" in caplog.records[0].getMessage()


def test_a_broken_log_handler_does_not_make_the_parser_raise() -> None:
    class Broken(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            raise RuntimeError("broken")

    logger = logging.getLogger(LOGGER)
    broken = Broken()
    logger.addFilter(broken)
    try:
        assert parse_coder_report("[]") is None
    finally:
        logger.removeFilter(broken)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)
report_like = st.dictionaries(
    st.sampled_from([*CoderReport.model_fields, "verdict", "kind", "path"]), json_values
)


def _check_outcome(raw: Any) -> None:
    report, warnings = _parse_counting(raw)
    assert report is None or isinstance(report, CoderReport)
    assert len(warnings) == (1 if report is None and _is_present(raw) else 0)


def _is_present(raw: Any) -> bool:
    if raw is None:
        return False
    if isinstance(raw, bytes | str):
        try:
            text = raw.decode("utf-8-sig") if isinstance(raw, bytes) else raw
        except UnicodeDecodeError:
            return True
        return bool(text.strip())
    return True


@given(json_values)
def test_any_json_value_never_raises(value: Any) -> None:
    _check_outcome(value)
    _check_outcome(json.dumps(value))


@given(report_like)
def test_report_shaped_json_never_raises(value: dict[str, Any]) -> None:
    _check_outcome(value)
    _check_outcome(json.dumps(value).encode())


@given(st.binary())
def test_any_bytes_never_raise(raw: bytes) -> None:
    _check_outcome(raw)


@given(st.text())
def test_any_text_never_raises(raw: str) -> None:
    _check_outcome(raw)


# The worktree is the only authority: the comparison with the diff.


def _report(*files: tuple[str, str]) -> CoderReport:
    return CoderReport.model_validate({"files": [{"path": p, "kind": k} for p, k in files]})


def test_claims_and_diff_disagree_both_ways() -> None:
    report = _report(("b.py", "modified"), ("a.py", "created"), ("ghost.py", "created"))
    comparison = compare_with_diff(report, ["z.py", "a.py", "b.py", "y.py"])
    assert comparison == DiffComparison(
        claimed_but_missing=["ghost.py"], unclaimed_but_present=["y.py", "z.py"]
    )


def test_no_report_claims_nothing() -> None:
    comparison = compare_with_diff(None, ["b.py", "a.py"])
    assert comparison.claimed_but_missing == []
    assert comparison.unclaimed_but_present == ["a.py", "b.py"]
    assert compare_with_diff(CoderReport(), ["a.py"]).unclaimed_but_present == ["a.py"]


def test_claimed_deletion_in_the_diff_is_present() -> None:
    comparison = compare_with_diff(_report(("old.py", "deleted")), ["old.py"])
    assert comparison == DiffComparison()
    missing = compare_with_diff(_report(("old.py", "deleted")), [])
    assert missing.claimed_but_missing == ["old.py"]


def test_paths_are_normalised_before_comparing() -> None:
    comparison = compare_with_diff(_report(("./src//a.py", "modified")), ["src/a.py"])
    assert comparison == DiffComparison()


def test_report_does_not_change_when_compared() -> None:
    report = _report(("a.py", "created"))
    compare_with_diff(report, ["b.py"])
    assert report.files == [FileChange(path="a.py", kind=FileChangeKind.CREATED)]


@given(
    st.lists(st.sampled_from(["a", "b", "c", "d/e"]), max_size=4),
    st.lists(st.sampled_from(["a", "b", "c", "d/e"]), max_size=4),
)
def test_comparison_is_the_two_set_differences(claimed: list[str], changed: list[str]) -> None:
    report = _report(*((path, "modified") for path in claimed))
    comparison = compare_with_diff(report, changed)
    assert comparison.claimed_but_missing == sorted(set(claimed) - set(changed))
    assert comparison.unclaimed_but_present == sorted(set(changed) - set(claimed))


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 500_000 + b"]" * 500_000,
        b'{"a":' * 170_000 + b"1" + b"}" * 170_000,
        ("{" + ",".join(f'"k{i}":{i}' for i in range(60_000)) + "}").encode(),
        json.dumps({"files": [{"path": "a", "kind": "moved", "x": 1}] * 23_000}).encode(),
        b'{"summary": "' + b"\xff" * 1_000_000 + b'"}',
    ],
    ids=["deep-arrays", "deep-objects", "many-keys", "many-bad-files", "invalid-utf8"],
)
def test_a_hostile_mebibyte_is_discarded_quickly(raw: bytes) -> None:
    started = time.perf_counter()
    report, reason = read_coder_report(raw)
    # The budget is 0.5 s (bench/report_parse.py); the margin absorbs a loaded test machine.
    assert time.perf_counter() - started < 1.0
    assert report is None and reason


def test_many_unknown_keys_are_named_a_few_at_a_time() -> None:
    report, reason = read_coder_report({f"k{i}": i for i in range(100)})
    assert report is None and reason == "unknown keys 'k0', 'k1', 'k2'; and 97 more"


def test_a_bad_file_entry_is_located_in_the_list() -> None:
    report, reason = read_coder_report(
        {"files": [{"path": "a", "kind": "created"}, {"path": "b", "kind": "renamed"}]}
    )
    assert report is None and reason and "files[1].kind" in reason
