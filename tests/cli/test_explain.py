"""What `task show` and `task list` say: messages shortened at a word boundary, and an error
of an earlier run not shown as the state of a task that is done."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

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
    task = Task.new(id="t1", title="t", instruction="i", now=NOW)
    assert error_note(task) is None
    task.last_error = "interrupted: assay was stopped by SIGINT"
    assert error_note(task) == "last error: interrupted: assay was stopped by SIGINT"
    task.status = TaskStatus.DONE
    assert error_note(task) == "earlier run: interrupted: assay was stopped by SIGINT"
