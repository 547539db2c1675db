"""What `task show` and `task list` say: messages shortened at a word boundary, and an error
of an earlier run not shown as the state of a task that is done."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from assay.adapters.store.task_rows import TaskRow, task_row
from assay.adapters.store.task_sql import TASK_FIELDS
from assay.cli.explain import error_note, shorten, wait_cause
from assay.core.tasks import Task
from assay.core.vocab import TaskStatus

NOW = datetime(2026, 1, 1, tzinfo=UTC)
REFUSED = (
    "every seat lost to a provider fault: llm: cannot reach http://127.0.0.1:9/v1 after 3 "
    "calls: connection refused (127.0.0.1:9)"
)


def test_a_long_message_is_cut_at_a_word_with_an_ellipsis() -> None:
    short = shorten(REFUSED, 100)
    assert short.endswith("…") and len(short) <= 100
    assert REFUSED.startswith(short[:-1])
    assert not REFUSED[len(short) - 1].isalnum()  # the cut fell between words


def test_a_short_message_is_kept_whole() -> None:
    assert shorten("tests failed", 60) == "tests failed"


@given(st.text(min_size=0, max_size=400), st.integers(min_value=10, max_value=300))
def test_shorten_never_exceeds_its_limit_and_keeps_a_prefix(text: str, limit: int) -> None:
    short = shorten(text, limit)
    assert len(short) <= limit
    flat = " ".join(text.split())
    if short.endswith("…") and len(flat) > limit:
        assert flat.startswith(short[:-1])
    else:
        assert short == flat


def test_wait_cause_does_not_cut_a_token() -> None:
    task = Task.new(id="t1", title="t", instruction="i", now=NOW)
    task.last_error = REFUSED * 3
    cause = wait_cause(task)
    assert cause.endswith("…)")
    assert "(127.0.0.1:)" not in cause


def test_a_done_task_shows_its_last_error_as_an_earlier_run() -> None:
    assert error_note(None, TaskStatus.FAILED) is None
    error = "interrupted: assay was stopped by SIGINT"
    assert error_note(error, TaskStatus.FAILED) == f"last error: {error}"
    assert error_note(error, TaskStatus.DONE) == f"earlier run: {error}"


FORGED = "evil\nnext: nothing: it is done"
BIDI = "report\u202eexe.txt"


def test_task_show_and_list_show_stored_text_escaped_on_its_line(tmp_path: Path) -> None:
    """A title, a hold reason, an error, a run's reason and a halt's evidence a coder could
    have chosen: each stays on its own line, its controls and bidi overrides shown."""
    from assay.adapters.store.records import RunRecord
    from assay.cli import task_views
    from assay.cli.usage_views import TaskUsage
    from assay.core.vocab import HoldSource, RunStatus, SettleRow

    task = Task.new(id="t1", title=f"fix {BIDI}", instruction="i", now=NOW).model_copy(
        update={
            "status": TaskStatus.HELD,
            "hold_source": HoldSource.MACHINE,
            "hold_reason": f"halt-scope-breach: forbidden by rule: {FORGED}",
            "last_error": "boom\x1b[2J\ndone",
        }
    )
    payload = tmp_path / "payload.json"
    fired = {"name": "halt-scope-breach", "severity": "block", "detail": f"{FORGED} {BIDI}"}
    payload.write_text(json.dumps({"halts": {"fired": [fired]}}))
    run = RunRecord(
        id="r1", task_id="t1", status=RunStatus.BLOCKED, started_at=NOW, finished_at=NOW,
        settle_row=SettleRow.HALTED, reason=f"blocked: {FORGED}", payload_path=str(payload),
    )  # fmt: skip
    usage = TaskUsage.of([])
    document = task_views.show_document(task, {}, [run], [], tmp_path, NOW, usage)
    assert document["fired_halts"][0]["detail"] == f"{FORGED} {BIDI}"  # JSON: as stored
    shown_text = task_views.show_text(task, [run], document, NOW, usage)
    listed = task_views.list_text([_row(task)], [], NOW)
    for text in (shown_text, listed):
        assert "\u202e" not in text and "\x1b" not in text
        assert not [
            line for line in text.splitlines() if line.startswith(("next: nothing", "done"))
        ]
    lines = shown_text.splitlines()
    assert lines[0] == 't1: "fix report<U+202E>exe.txt"'
    assert lines[2] == (
        'held by the machine: "halt-scope-breach: forbidden by rule: '
        'evil\\nnext: nothing: it is done"'
    )
    assert 'last error: "boom\\x1b[2J\\ndone"' in lines
    assert any(line.endswith('it is done report<U+202E>exe.txt"') for line in lines)
    assert len(listed.splitlines()) == 2


def _row(task: Task) -> TaskRow:
    """The task as ``task list`` reads it, from its fields as a row of text."""
    stored = task.model_dump(mode="json")
    return task_row(tuple(stored[name] for name in TASK_FIELDS), task.run_ids)
