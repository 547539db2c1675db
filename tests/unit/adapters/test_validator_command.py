"""The command validator: exit code to verdict, timeouts are errors, findings are stable."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

from assay.adapters.validators import get_validator
from assay.adapters.validators.base import ValidationContext, ValidationOutcome
from assay.adapters.validators.command import CommandValidator, stable_findings
from assay.core.changes import ChangeSet
from assay.core.vocab import Severity

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}


def _validate(tree: Path, env: dict[str, str] | None = None, **settings: Any) -> ValidationOutcome:
    tree.mkdir(parents=True, exist_ok=True)
    context = ValidationContext(
        worktree=tree,
        change=ChangeSet(base_commit="0" * 40),
        task="t",
        env=env or ENV,
        settings={"id": "tests", **settings},
        log_dir=tree.parent / f"logs-{tree.name}",
    )
    return CommandValidator().validate(context)


def test_exit_zero_passes(tmp_path: Path) -> None:
    result = _validate(tmp_path / "wt", run="true").result
    assert (result.severity, result.error, result.validator_id) == (Severity.PASS, False, "tests")
    assert result.findings == []


def test_non_zero_blocks_with_the_output_tail(tmp_path: Path) -> None:
    outcome = _validate(tmp_path / "wt", run="echo broken thing; exit 2")
    result = outcome.result
    assert result.severity is Severity.BLOCK and result.blocks and not result.error
    assert not result.advisory
    assert "exited 2" in result.justification and "broken thing" in result.justification
    assert result.findings == ["broken thing"]
    assert outcome.fire is None


def test_on_fail_warn_only_warns(tmp_path: Path) -> None:
    result = _validate(tmp_path / "wt", run="exit 1", on_fail="warn").result
    assert result.severity is Severity.WARN and result.advisory
    assert result.effective_severity is Severity.WARN and not result.blocks


def test_timeout_is_an_error_never_a_pass(tmp_path: Path) -> None:
    result = _validate(tmp_path / "wt", run="echo started; sleep 30", timeout_seconds=0.3).result
    assert result.error
    assert result.severity is not Severity.PASS
    assert "did not finish" in result.justification and "started" in result.justification


def test_a_missing_tool_is_an_error(tmp_path: Path) -> None:
    result = _validate(tmp_path / "wt", run="assay-no-such-linter .").result
    assert result.error and "install" in result.justification


def test_no_run_is_an_error(tmp_path: Path) -> None:
    assert _validate(tmp_path / "wt").result.error


def test_it_runs_in_the_worktree_with_the_given_env(tmp_path: Path) -> None:
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / "marker").write_text("")
    ok = _validate(tree, env={**ENV, "X": "y"}, run='test -f marker && test "$X" = y')
    assert ok.result.severity is Severity.PASS
    assert _validate(tree, run='test "$X" = y').result.severity is Severity.BLOCK


PYTEST_LIKE = """\
============================= test session starts ==============================
collected 3 items

tests/test_slug.py F.F                                                   [100%]
=========================== short test summary info ============================
FAILED tests/test_slug.py::test_digits - AssertionError: assert 'ab' == 'a1b' at 0x{addr}
FAILED tests/test_slug.py::test_case[upper] - ValueError
========================= 2 failed, 1 passed in {secs}s =========================
"""


def test_findings_are_the_failing_test_ids_and_stable_across_runs(tmp_path: Path) -> None:
    outputs = [
        PYTEST_LIKE.format(addr="7f3a9c", secs="0.12"),
        PYTEST_LIKE.format(addr="1b2", secs="3.40"),
    ]
    runs = []
    for index, text in enumerate(outputs):
        script = f"printf '%s' {shlex.quote(text)}; exit 1"
        runs.append(_validate(tmp_path / f"wt{index}", run=script).result.findings)
    assert (
        runs[0]
        == runs[1]
        == [
            "FAILED tests/test_slug.py::test_digits",
            "FAILED tests/test_slug.py::test_case[upper]",
        ]
    )


def test_without_test_ids_the_tail_is_kept_without_timings_or_paths(tmp_path: Path) -> None:
    findings = []
    for index, secs in enumerate(["0.12", "11.5"]):
        tree = tmp_path / f"wt{index}"
        script = f'echo "$PWD/src/x.py:3:1: E501 line too long"; echo "done in {secs}s"; exit 1'
        findings.append(_validate(tree, run=script).result.findings)
    assert findings[0] == findings[1] == ["./src/x.py:3:1: E501 line too long", "done in ?s"]


def test_real_pytest_output_gives_the_failing_ids(tmp_path: Path) -> None:
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / "test_demo.py").write_text(
        "def test_ok():\n    assert True\n\n\ndef test_bad():\n    assert 1 == 2\n"
    )
    run = f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider test_demo.py"
    result = _validate(tree, run=run).result
    assert result.severity is Severity.BLOCK
    assert result.findings == ["FAILED test_demo.py::test_bad"]


def test_stable_findings_drops_separator_lines_and_keeps_the_last_five() -> None:
    text = "\n".join([*(f"line {i}" for i in range(10)), "=====", ""])
    assert stable_findings(text) == [f"line {i}" for i in range(5, 10)]


def test_registry_returns_the_command_validator() -> None:
    assert isinstance(get_validator("command"), CommandValidator)


def test_on_fail_warn_a_command_that_cannot_run_is_an_error_of_severity_warn(
    tmp_path: Path,
) -> None:
    for run, settings in (
        ("no-such-linter-anywhere .", {}),
        ("sleep 30", {"timeout_seconds": 0.3}),
    ):
        result = _validate(tmp_path / "wt", run=run, on_fail="warn", **settings).result
        assert result.error and result.advisory and not result.halts, run
        assert result.severity is Severity.WARN is result.effective_severity, run
        blocking = _validate(tmp_path / "wt", run=run, **settings).result
        assert blocking.error and blocking.halts and blocking.severity is Severity.BLOCK, run


def test_only_warns_makes_any_outcome_advisory_and_says_why_it_could_not_run(
    tmp_path: Path,
) -> None:
    from assay.adapters.validators.base import could_not_run, only_warns
    from assay.core.quota import Quota

    timed_out = _validate(tmp_path / "wt", run="sleep 30", timeout_seconds=0.3)
    # as a judge lost to its provider would come back: a fault the engine refunds the run for
    lost = ValidationOutcome(
        result=timed_out.result, quota=Quota(kind="usage_limit", detail="q"), fault="down"
    )
    warned = only_warns(lost)
    assert warned.quota is None and warned.fault is None
    assert warned.result.advisory and warned.result.severity is Severity.WARN
    said = could_not_run(warned.result)
    assert said == (
        "validator tests could not run; on_fail: warn, so it only warns: "
        "`sleep 30` did not finish in 0.3 s (its `timeout_seconds`) and was killed"
    )
