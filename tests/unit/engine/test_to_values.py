"""Which report a seat keeps: the coder's file, else what its adapter read from the program; a
file without a summary takes the program's final answer (so ``NO CHANGE NEEDED:`` counts)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from assay.adapters.coders.base import DispatchRequest
from assay.adapters.coders.command import CommandCoder
from assay.adapters.coders.replay import ReplayCoder
from assay.core.report import CoderReport, FileChange
from assay.core.vocab import FileChangeKind, StopReason
from assay.engine.local.to_values import captured_output, with_final_answer

ANSWER = CoderReport(
    summary="NO CHANGE NEEDED: test_digits passes", stop_reason=StopReason.COMPLETED
)


def test_no_file_keeps_the_final_answer_as_the_summary() -> None:
    assert with_final_answer(None, ANSWER) == ANSWER
    assert with_final_answer(None, None) is None


def test_a_file_without_a_summary_takes_the_final_answer() -> None:
    written = CoderReport(files=[FileChange(path="a.py", kind=FileChangeKind.MODIFIED)])
    kept = with_final_answer(written, ANSWER)
    assert kept is not None
    assert kept.summary == ANSWER.summary
    assert kept.files == written.files and kept.stop_reason is None  # the rest is the file's


def test_a_file_with_a_summary_wins() -> None:
    written = CoderReport(summary="changed a.py")
    assert with_final_answer(written, ANSWER) == written
    assert with_final_answer(written, None) == written


# --- the coder's output, for the secret scan ---------------------------------------------------


def _request(tmp_path: Path, settings: dict[str, Any]) -> DispatchRequest:
    worktree = tmp_path / "wt"
    worktree.mkdir(exist_ok=True)
    return DispatchRequest(
        worktree=worktree,
        prompt="p",
        dispatch_id="d-1",
        attempt=1,
        seat=1,
        halt_state_dir=tmp_path / "halt-state",
        report_path=tmp_path / "logs" / "report.json",
        log_dir=tmp_path / "logs",
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"},
        settings=settings,
        timeout_seconds=10.0,
    )


# The operator's script holds this literally; only a coder that ran prints the computed one.
SCRIPT = '# deploy with SCRIPT-LITERAL-7\necho "PRINTED-$((40+2))"\necho "ERR-$((1+1))" >&2'


def test_a_command_coders_output_is_what_it_printed_never_its_command_line(
    tmp_path: Path,
) -> None:
    result = CommandCoder().dispatch(_request(tmp_path, {"kind": "command", "command": SCRIPT}))
    assert result.exit_code == 0, result
    captured = captured_output(result)
    assert "PRINTED-42" in captured and "ERR-2" in captured
    assert "SCRIPT-LITERAL-7" not in captured
    assert result.log_path is not None and "SCRIPT-LITERAL-7" in result.log_path.read_text()


def test_a_replay_coders_output_is_what_its_steps_printed(tmp_path: Path) -> None:
    settings = {"kind": "replay", "steps": [{"script": SCRIPT}]}
    result = ReplayCoder().dispatch(_request(tmp_path, settings))
    assert result.exit_code == 0, result
    captured = captured_output(result)
    assert "PRINTED-42" in captured and "ERR-2" in captured
    assert "SCRIPT-LITERAL-7" not in captured
