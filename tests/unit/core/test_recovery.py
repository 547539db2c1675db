from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from assay.core.recovery import MAX_FAILURE_CHARS, PriorFailure, recovery_spec


def test_first_attempt_gets_the_root_spec_unchanged() -> None:
    assert recovery_spec("Fix slugify.", []) == "Fix slugify."


def test_every_prior_failure_is_tagged_with_its_attempt() -> None:
    spec = recovery_spec(
        "Fix slugify.",
        [
            PriorFailure(attempt=1, source="tests", detail="FAILED test_digits"),
            PriorFailure(attempt=2, source="lint", detail="E501 line too long"),
        ],
    )
    assert spec.startswith("Fix slugify.\n")
    assert "[attempt 1] tests: FAILED test_digits" in spec
    assert "[attempt 2] lint: E501 line too long" in spec
    assert spec.index("[attempt 1]") < spec.index("[attempt 2]")


def test_long_details_keep_their_tail() -> None:
    detail = "x" * 5000 + "THE SUMMARY"
    spec = recovery_spec("root", [PriorFailure(attempt=1, source="tests", detail=detail)])
    assert spec.endswith("THE SUMMARY")
    assert len(spec) < len("root") + MAX_FAILURE_CHARS + 200


@given(st.lists(st.tuples(st.integers(1, 50), st.text(max_size=30)), max_size=10))
def test_all_failures_survive(items: list[tuple[int, str]]) -> None:
    failures = [PriorFailure(attempt=a, source="v", detail=d) for a, d in items]
    spec = recovery_spec("root", failures)
    assert spec.count("[attempt ") >= len(items)
