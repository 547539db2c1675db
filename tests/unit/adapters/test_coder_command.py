"""The command coder: any command line, the prompt by file, stdin or env, in a real worktree."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
from support.repo import git

from assay.adapters.coders import get_coder, ignored_settings
from assay.adapters.coders.base import DispatchRequest, DispatchResult
from assay.adapters.coders.command import CommandCoder
from assay.core.contract import CoderSpec

PROMPT = "Make slugify() keep digits.\nLine two: 'quotes' and $dollars."
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    tree = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "--detach", str(tree), "HEAD")
    return tree


def _request(
    tmp_path: Path, worktree: Path, timeout: float = 10.0, **settings: Any
) -> DispatchRequest:
    return DispatchRequest(
        worktree=worktree,
        prompt=PROMPT,
        dispatch_id="d-1",
        attempt=2,
        seat=3,
        halt_state_dir=tmp_path / "halt-state",
        report_path=tmp_path / "logs" / "report.json",
        log_dir=tmp_path / "logs",
        env=ENV,
        settings={"kind": "command", **settings},
        timeout_seconds=timeout,
    )


def _dispatch(tmp_path: Path, worktree: Path, **settings: Any) -> DispatchResult:
    return CommandCoder().dispatch(_request(tmp_path, worktree, **settings))


def _status(worktree: Path) -> str:
    return git(worktree, "status", "--porcelain")


def test_prompt_by_file_placeholder_and_env(tmp_path: Path, worktree: Path) -> None:
    result = _dispatch(
        tmp_path,
        worktree,
        command='cp {prompt_file} got.txt && printf %s "$ASSAY_PROMPT_FILE" > where',
    )
    assert result.exit_code == 0 and result.error is None and result.environment_error is None
    assert (worktree / "got.txt").read_text() == PROMPT
    prompt_file = Path((worktree / "where").read_text())
    assert prompt_file.read_text() == PROMPT
    assert worktree not in prompt_file.parents  # never part of the diff
    assert "got.txt" in _status(worktree)


def test_prompt_by_stdin(tmp_path: Path, worktree: Path) -> None:
    result = _dispatch(tmp_path, worktree, command="cat > got.txt", prompt_via="stdin")
    assert result.exit_code == 0
    assert (worktree / "got.txt").read_text() == PROMPT


def test_prompt_by_env(tmp_path: Path, worktree: Path) -> None:
    result = _dispatch(
        tmp_path, worktree, command='printf %s "$ASSAY_PROMPT" > got.txt', prompt_via="env"
    )
    assert result.exit_code == 0
    assert (worktree / "got.txt").read_text() == PROMPT


def test_an_argv_list_runs_without_a_shell(tmp_path: Path, worktree: Path) -> None:
    command = [
        "/bin/sh",
        "-c",
        'cp "$1" got.txt; printf "%s" "$2" > arg.txt',
        "sh",
        "{prompt_file}",
    ]
    result = _dispatch(tmp_path, worktree, command=command, args=["a b; rm -rf /"])
    assert result.exit_code == 0
    assert (worktree / "got.txt").read_text() == PROMPT
    assert (worktree / "arg.txt").read_text() == "a b; rm -rf /"


def test_args_are_quoted_onto_a_shell_string(tmp_path: Path, worktree: Path) -> None:
    result = _dispatch(tmp_path, worktree, command='printf "%s|" > out.txt', args=["x y", "$HOME"])
    assert result.exit_code == 0
    assert (worktree / "out.txt").read_text() == "x y|$HOME|"


def test_the_child_gets_the_assay_variables_and_nothing_else(
    tmp_path: Path, worktree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPERATOR_SECRET_TOKEN", "must-not-leak")
    result = _dispatch(tmp_path, worktree, command="env > ../env.txt")
    assert result.exit_code == 0
    seen = dict(
        line.split("=", 1)
        for line in (tmp_path / "env.txt").read_text().splitlines()
        if "=" in line
    )
    assert seen["ASSAY_DISPATCH_ID"] == "d-1"
    assert seen["ASSAY_HALT_STATE_DIR"] == str(tmp_path / "halt-state")
    assert seen["ASSAY_REPORT_PATH"] == str(tmp_path / "logs" / "report.json")
    assert (seen["ASSAY_ATTEMPT"], seen["ASSAY_SEAT"]) == ("2", "3")
    assert "OPERATOR_SECRET_TOKEN" not in seen
    assert "ASSAY_PROMPT" not in seen  # only with prompt_via: env


def test_timeout_keeps_what_was_written_and_sets_no_stop_reason(
    tmp_path: Path, worktree: Path
) -> None:
    request = _request(
        tmp_path, worktree, timeout=0.5, command="echo partial > partial.txt; echo said; sleep 30"
    )
    result = CommandCoder().dispatch(request)
    assert result.timed_out
    assert result.stop_reason is None  # a timeout is the engine's fact, not the coder's
    assert result.exit_code is None
    assert result.environment_error is None
    assert (worktree / "partial.txt").read_text() == "partial\n"
    assert result.log_path is not None and "said" in result.log_path.read_text()


def test_a_missing_executable_is_the_operators_setting(tmp_path: Path, worktree: Path) -> None:
    result = _dispatch(tmp_path, worktree, command=["assay-no-such-agent", "--go"])
    assert result.environment_error is None  # not a machine fault: never refunded
    assert result.setting_error == (
        "the command coder: assay-no-such-agent not found on PATH: install it "
        "(or fix `coder.command`)"
    )
    assert result.error is None


def test_a_missing_command_in_a_shell_string_is_the_operators_setting(
    tmp_path: Path, worktree: Path
) -> None:
    result = _dispatch(tmp_path, worktree, command="assay-no-such-agent --go {prompt_file}")
    assert result.environment_error is None
    assert result.setting_error is not None
    assert result.setting_error.startswith(
        "the command coder: assay-no-such-agent not found on PATH: install it"
    )
    assert "exit 127" in result.setting_error  # and what the shell said


def test_no_command_is_an_environment_error(tmp_path: Path, worktree: Path) -> None:
    result = _dispatch(tmp_path, worktree)
    assert result.environment_error is not None and "coder.command" in result.environment_error


def test_a_failing_command_is_an_error_with_its_output(tmp_path: Path, worktree: Path) -> None:
    result = _dispatch(tmp_path, worktree, command="echo boom >&2; exit 3")
    assert result.exit_code == 3
    assert result.error is not None and "exited with code 3" in result.error
    # what it printed follows on lines of its own, for the progress to quote under the error
    assert result.error.endswith("exited with code 3; output tail:\nboom")
    assert "boom" in result.error
    assert result.environment_error is None and not result.timed_out


def test_registry_and_ignored_settings() -> None:
    coder = get_coder("command")
    assert isinstance(coder, CommandCoder)
    assert coder.kind == "command"
    spec = CoderSpec(kind="command", command="x", model="gpt", max_turns=3, prompt_via="stdin")
    assert ignored_settings(spec, coder) == ["max_turns", "model"]
    assert ignored_settings(CoderSpec(kind="command", command="x"), coder) == []
    replay = get_coder("replay")
    assert ignored_settings(CoderSpec(kind="replay", steps=[{"script": "true"}]), replay) == []
    assert ignored_settings(
        CoderSpec(kind="replay", steps=[{"script": "true"}], command="x"), replay
    ) == ["command"]
    with pytest.raises(ValueError, match="unknown coder kind"):
        get_coder("nope")


def test_a_prompt_too_long_for_the_environment_is_an_environment_error(
    tmp_path: Path, worktree: Path
) -> None:
    request = _request(tmp_path, worktree, command="true", prompt_via="env")
    huge = DispatchRequest(**{**request.__dict__, "prompt": "x" * 300_000})
    result = CommandCoder().dispatch(huge)
    assert result.environment_error is not None and "prompt_via: file" in result.environment_error


def test_a_file_that_is_not_executable_is_the_operators_setting(
    tmp_path: Path, worktree: Path
) -> None:
    tool = tmp_path / "agent.sh"
    tool.write_text("#!/bin/sh\necho hi\n")
    result = _dispatch(tmp_path, worktree, command=[str(tool)])
    assert result.environment_error is None
    assert result.setting_error is not None and str(tool) in result.setting_error


def test_the_brief_is_at_assay_brief_path_outside_the_worktree(
    tmp_path: Path, worktree: Path
) -> None:
    brief = '# The rules\n\nassay halt check --dispatch-id "$ASSAY_DISPATCH_ID" …\n'
    request = dataclasses.replace(
        _request(tmp_path, worktree, command='printf %s "$ASSAY_BRIEF_PATH" > where'),
        brief=brief,
    )
    result = CommandCoder().dispatch(request)
    assert result.exit_code == 0, result
    path = Path((worktree / "where").read_text())
    assert path == (tmp_path / "logs" / "brief-attempt2.md").resolve()  # the seat's log folder
    assert path.read_text(encoding="utf-8") == brief
    assert worktree not in path.parents  # never part of the diff


class SpentAfter:
    """A meter whose run's budget another seat spends ``seconds`` after the dispatch starts."""

    def __init__(self, seconds: float) -> None:
        import time

        self._at = time.monotonic() + seconds
        self._clock = time.monotonic

    def report(self, figures: object) -> None:
        raise AssertionError("the command coder reports no usage")

    def stop_reason(self) -> str | None:
        return "halt-budget-exhausted: spent" if self._clock() >= self._at else None

    def remaining_cost_usd(self) -> float | None:
        return None

    def remaining_tokens(self) -> int | None:
        return None


def test_a_budget_its_run_spent_elsewhere_stops_it(tmp_path: Path, worktree: Path) -> None:
    request = dataclasses.replace(
        _request(tmp_path, worktree, command="sleep 20"), meter=SpentAfter(0.3)
    )
    result = CommandCoder().dispatch(request)
    assert result.stopped == "halt-budget-exhausted: spent"
    assert result.error == "stopped by assay: halt-budget-exhausted: spent"
    assert result.wall_time_ms < 10_000 and not result.timed_out
