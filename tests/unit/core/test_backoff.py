"""Quota waits: the provider's reset time or an exponential backoff, and a task that waits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.core.backoff import (
    QUOTA_ROWS,
    RESET_MARGIN_SECONDS,
    quota_streak,
    quota_wait,
)
from assay.core.settle import Verdict, settle
from assay.core.tasks import Task, TaskTransitionError
from assay.core.vocab import RunStatus, SettleRow, TaskStatus

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
MARGIN = timedelta(seconds=RESET_MARGIN_SECONDS)

moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


def test_the_providers_reset_time_wins_with_a_small_margin() -> None:
    reset = NOW + timedelta(minutes=17)
    assert quota_wait(reset, NOW, 1) == reset + MARGIN
    assert quota_wait(reset, NOW, 9) == reset + MARGIN  # the streak does not stretch it


def test_a_reset_time_beyond_the_cap_is_still_honoured() -> None:
    reset = NOW + timedelta(hours=5)  # a five-hour usage window
    assert quota_wait(reset, NOW, 1, cap_seconds=3600) == reset + MARGIN


def test_a_reset_time_already_past_falls_back_to_the_backoff() -> None:
    assert quota_wait(NOW - timedelta(hours=1), NOW, 2) == NOW + timedelta(minutes=2)


def test_without_a_reset_time_the_backoff_doubles_up_to_the_cap() -> None:
    waits = [quota_wait(None, NOW, n) - NOW for n in range(1, 9)]
    assert [w.total_seconds() for w in waits] == [60, 120, 240, 480, 960, 1920, 3600, 3600]
    assert quota_wait(None, NOW, 10**9) == NOW + timedelta(hours=1)


def test_an_absurd_reset_time_does_not_crash() -> None:
    far = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert quota_wait(far, NOW, 1) == NOW + timedelta(minutes=1)


@pytest.mark.parametrize(
    ("consecutive", "base", "cap"), [(0, 60, 3600), (-1, 60, 3600), (1, 0, 3600), (1, 90, 60)]
)
def test_bad_arguments_are_refused(consecutive: int, base: float, cap: float) -> None:
    with pytest.raises(ValueError):
        quota_wait(None, NOW, consecutive, base, cap)


@given(st.one_of(st.none(), moments), moments, st.integers(min_value=1, max_value=10_000))
def test_the_wait_is_never_before_now(
    reset: datetime | None, now: datetime, consecutive: int
) -> None:
    assert quota_wait(reset, now, consecutive) > now


@given(
    moments,
    st.integers(min_value=1, max_value=200),
    st.integers(min_value=1, max_value=600),
    st.integers(min_value=0, max_value=86_400),
)
def test_the_backoff_grows_with_the_streak_until_the_cap(
    now: datetime, consecutive: int, base: int, extra: int
) -> None:
    cap = base + extra
    this = quota_wait(None, now, consecutive, base, cap)
    following = quota_wait(None, now, consecutive + 1, base, cap)
    assert following >= this
    assert following - now <= timedelta(seconds=cap)
    if this - now < timedelta(seconds=cap):
        assert following > this


def test_the_streak_counts_only_the_newest_quota_rows() -> None:
    quota, other = SettleRow.STALLED_QUOTA, SettleRow.STALLED_OR_FAILED
    assert quota_streak([]) == 0
    assert quota_streak([quota, SettleRow.FAILED_QUOTA_NO_VIABLE]) == 2
    assert quota_streak([quota, quota, other, quota]) == 1
    assert quota_streak([quota, other]) == 0
    assert quota_streak([quota, None]) == 0
    assert {SettleRow.STALLED_QUOTA, SettleRow.FAILED_QUOTA_NO_VIABLE} == QUOTA_ROWS


# -- the task's side ------------------------------------------------------------------------


def quota_refunded() -> Task:
    task = Task.new(id="t1", title="t", instruction="i", now=NOW)
    task.start(NOW, run_id="r1")
    verdict = Verdict(status=RunStatus.STALLED, quota_hit=True)
    assert settle(task, verdict, "rate limited", 3, NOW).row is SettleRow.STALLED_QUOTA
    task.wait_until(NOW + timedelta(minutes=10), NOW)
    return task


def test_a_waiting_task_is_not_runnable_until_its_time() -> None:
    task = quota_refunded()
    assert task.status is TaskStatus.FAILED and task.attempts == 0
    assert task.waiting(NOW) and not task.runnable(NOW)
    assert not task.runnable(NOW + timedelta(minutes=9, seconds=59))
    assert task.runnable(NOW + timedelta(minutes=10))
    assert not task.waiting(NOW + timedelta(minutes=10))


def test_starting_clears_the_wait() -> None:
    task = quota_refunded()
    task.start(NOW, run_id="r2")  # a caller that chose to run it now
    assert task.not_before is None


def test_skip_wait_clears_it_and_keeps_the_attempts() -> None:
    task = quota_refunded()
    task.attempts = 2
    task.skip_wait(NOW)
    assert task.runnable(NOW) and task.attempts == 2 and task.status is TaskStatus.FAILED


def test_hold_and_release_clear_the_wait() -> None:
    task = quota_refunded()
    task.hold("not now", NOW)
    assert task.not_before is None
    task.release(NOW)
    assert task.not_before is None and task.runnable(NOW)


def test_only_a_failed_task_can_be_made_to_wait() -> None:
    task = Task.new(id="t1", title="t", instruction="i", now=NOW)
    with pytest.raises(TaskTransitionError, match="set a wait on"):
        task.wait_until(NOW + timedelta(minutes=1), NOW)
    assert task.not_before is None


def test_a_persisted_wait_round_trips() -> None:
    task = quota_refunded()
    assert Task.model_validate_json(task.model_dump_json()) == task
    assert task.model_dump(mode="json")["not_before"] == "2025-01-01T12:10:00Z"
