"""The template `assay contract init` writes: its validators are the ones found to run, each
other one commented out with a comment saying what was looked for; it always parses."""

from __future__ import annotations

import itertools

import pytest
import yaml

from assay.core.contract import CoderSpec, contract_template, parse_contract
from assay.core.contract_template import TEMPLATE_CODER, FoundTool, ToolFacts

PYTESTS = [None, FoundTool("python3 -m pytest", ".venv/bin"), FoundTool("pytest")]
RUFFS = [None, FoundTool("ruff"), FoundTool("ruff", "venv/bin")]
EVERY = [
    ToolFacts(pytest=p, test_files=t, ruff=r)
    for p, t, r in itertools.product(PYTESTS, [False, True], RUFFS)
]


def _checks(facts: ToolFacts) -> dict[str, tuple[str, str]]:
    return {
        v.id: (v.run or "", v.on_fail.value)
        for v in parse_contract(contract_template(facts)).validators
    }


@pytest.mark.parametrize("facts", EVERY, ids=repr)
def test_every_template_parses_and_runs_only_what_was_found(facts: ToolFacts) -> None:
    text = contract_template(facts)
    checks = _checks(facts)
    if facts.pytest is not None and facts.test_files:
        assert checks.pop("tests") == (f"{facts.pytest.command} -q", "block")
    if facts.ruff is not None:
        assert checks.pop("lint") == ("ruff check .", "warn")
    assert checks == {}
    # what was not found is there to uncomment, and uncommented it parses
    for line in text.splitlines():
        if line.startswith("  # - {id: tests") or line.startswith("  # - {id: lint"):
            assert line.replace("  # - ", "  - ", 1) not in text
    assert "# Found by `assay contract init`" in text
    assert "@VALIDATORS@" not in text


def test_nothing_found_leaves_an_empty_list_that_uncomments_into_a_valid_one() -> None:
    text = contract_template(ToolFacts())
    assert parse_contract(text).validators == []
    assert "pytest runs neither as `python3 -m pytest` nor as `pytest`" in text
    assert "ruff not found" in text
    uncommented = text.replace("validators: []", "validators:", 1)
    uncommented = uncommented.replace("  # - {id: tests", "  - {id: tests", 1)
    uncommented = uncommented.replace("  # - {id: lint", "  - {id: lint", 1)
    checks = {v.id: v.run for v in parse_contract(uncommented).validators}
    assert checks == {"tests": "python3 -m pytest -q", "lint": "ruff check ."}


def test_the_comment_says_where_each_tool_was_found() -> None:
    facts = ToolFacts(
        pytest=FoundTool("python3 -m pytest", ".venv/bin"), test_files=True, ruff=FoundTool("ruff")
    )
    text = contract_template(facts)
    assert "tests: `python3 -m pytest` runs (python3 from the repository's .venv/bin)" in text
    assert "lint: `ruff` runs (ruff from your PATH)" in text
    without_tests = contract_template(ToolFacts(pytest=FoundTool("pytest")))
    assert "no test_*.py or *_test.py file yet" in " ".join(
        line.lstrip("# ") for line in without_tests.splitlines()
    )


@pytest.mark.parametrize("facts", EVERY, ids=repr)
def test_the_comment_lines_stay_short(facts: ToolFacts) -> None:
    text = contract_template(facts)
    start = text.index("# Found by")
    block = text[start : text.index("\n\n", start)]
    assert all(len(line) <= 100 for line in block.splitlines()), block


def test_the_coder_values_the_template_writes_are_template_coder() -> None:
    written = yaml.safe_load(contract_template())["coder"]
    assert written == dict(TEMPLATE_CODER)
    assert set(TEMPLATE_CODER) <= set(CoderSpec.model_fields)
