"""The unit tier's guard (tests/unit/conftest.py) refuses to start the ``assay`` program in
every phase of a unit item: a session-scoped fixture is set up inside the first item that
needs it, before any function-scoped fixture, and must be refused all the same."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.repo import ASSAY


def _attempt(argv: list[str]) -> str:
    """What starting ``argv`` came to: the guard's refusal, or that it started."""
    try:
        done = subprocess.run(argv, capture_output=True, timeout=60, check=False)
    except RuntimeError as refused:
        return str(refused)
    return f"started (exit {done.returncode})"


@pytest.fixture(scope="session")
def started_by_a_session_fixture() -> str:
    return _attempt([str(ASSAY), "--version"])


def test_a_session_fixture_cannot_start_the_assay_program(
    started_by_a_session_fixture: str,
) -> None:
    assert "started the assay program" in started_by_a_session_fixture


@pytest.mark.parametrize(
    "argv", [[str(ASSAY), "--help"], [sys.executable, "-m", "assay.cli.main", "--help"]]
)
def test_a_test_cannot_start_the_assay_program(argv: list[str]) -> None:
    assert "started the assay program" in _attempt(argv)


def test_other_programs_still_start() -> None:
    assert _attempt(["git", "--version"]) == "started (exit 0)"
