"""Which report a seat keeps: the coder's file, else what its adapter read from the program; a
file without a summary takes the program's final answer (so ``NO CHANGE NEEDED:`` counts)."""

from __future__ import annotations

from assay.core.report import CoderReport, FileChange
from assay.core.vocab import FileChangeKind, StopReason
from assay.engine.seat_results import with_final_answer

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
