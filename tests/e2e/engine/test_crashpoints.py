"""ASSAY_CRASH_AT: which boundary it names, and that reaching it ends the process at once."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from assay.core.vocab import CrashPoint
from assay.engine.crashpoints import CRASH_ENV, CRASH_EXIT, parse_crash_at


@given(st.sampled_from(CrashPoint), st.integers(min_value=1, max_value=10_000))
def test_a_point_and_an_occurrence_parse(point: CrashPoint, n: int) -> None:
    assert parse_crash_at(f"{point.value}:{n}") == (point, n)
    assert parse_crash_at(point.value) == (point, 1)


@given(st.text(max_size=40))
def test_any_other_text_is_ignored_without_raising(text: str) -> None:
    parsed = parse_crash_at(text)
    assert parsed is None or (parsed[0].value == text.strip().partition(":")[0] and parsed[1] >= 1)


def test_zero_or_negative_occurrences_name_nothing() -> None:
    assert parse_crash_at("armed:0") is None
    assert parse_crash_at("armed:-1") is None
    assert parse_crash_at("armed:x") is None


def _reach(points: list[str], crash_at: str) -> subprocess.CompletedProcess[str]:
    """A child process that reaches ``points`` in order and prints each one it got past."""
    code = (
        "from assay.core.vocab import CrashPoint\n"
        "from assay.engine.crashpoints import crash_point\n"
        f"for name in {points!r}:\n"
        "    crash_point(CrashPoint(name))\n"
        "    print(name, flush=True)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        env={CRASH_ENV: crash_at, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_named_boundary_ends_the_process_like_kill_9() -> None:
    done = _reach(["armed", "dispatch_started", "validated"], "dispatch_started")
    assert done.returncode == CRASH_EXIT
    assert done.stdout.split() == ["armed"]


def test_the_nth_occurrence_is_the_one_that_ends_it() -> None:
    done = _reach(["dispatch_started"] * 4, "dispatch_started:3")
    assert done.returncode == CRASH_EXIT
    assert done.stdout.split() == ["dispatch_started"] * 2


def test_unset_or_unreached_changes_nothing() -> None:
    done = _reach(["armed", "validated"], "ledger_closed")
    assert done.returncode == 0
    assert done.stdout.split() == ["armed", "validated"]
