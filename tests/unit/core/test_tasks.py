"""Task lifecycle: each move, each refused move, and the attempt counter's floor."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from assay.core.tasks import RUNNABLE_STATUSES, Task, TaskTransitionError
from assay.core.vocab import HoldSource, TaskStatus

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def new_task() -> Task:
    return Task.new(id="t1", title="digits", instruction="keep digits", now=T0)


def running_task(attempts: int = 1) -> Task:
    task = new_task()
    task.status = TaskStatus.RUNNING
    task.attempts = attempts
    return task


def held_task(source: HoldSource = HoldSource.MACHINE) -> Task:
    task = new_task()
    task.status = TaskStatus.HELD
    task.attempts = 3
    task.hold_source = source
    task.hold_reason = "look at it"
    return task


def test_new_task_is_queued_and_clean() -> None:
    task = new_task()
    assert task.status == TaskStatus.QUEUED
    assert task.attempts == 0
    assert task.run_ids == []
    assert task.created_at == task.updated_at == T0
    assert task.last_error is task.hold_reason is task.hold_source is task.diagnostic is None
    assert task.runnable(T1)


def test_start_spends_an_attempt_and_records_the_run() -> None:
    task = new_task()
    task.start(T1, run_id="r1")
    assert task.status == TaskStatus.RUNNING
    assert task.attempts == 1
    assert task.run_ids == ["r1"]
    assert task.updated_at == T1
    assert task.created_at == T0
    assert not task.runnable(T1)


def test_start_from_failed_is_allowed() -> None:
    task = running_task(attempts=1)
    task.fail("boom", 3, T1)
    task.start(T1)
    assert task.status == TaskStatus.RUNNING
    assert task.attempts == 2


def test_start_refuses_a_run_id_it_already_has() -> None:
    task = new_task()
    task.start(T0, run_id="r1")
    task.stall("quota", T0)
    before = task.model_dump()
    with pytest.raises(ValueError, match="already recorded"):
        task.start(T1, run_id="r1")
    assert task.model_dump() == before


def test_stall_refunds_the_attempt() -> None:
    task = running_task(attempts=2)
    task.stall("rate limited", T1)
    assert task.status == TaskStatus.FAILED
    assert task.attempts == 1
    assert task.last_error == "rate limited"
    assert task.hold_source is None
    assert task.updated_at == T1


def test_stall_never_goes_below_zero() -> None:
    task = running_task(attempts=0)
    task.stall("rate limited", T1)
    assert task.attempts == 0


def test_fail_below_budget_requeues() -> None:
    task = running_task(attempts=2)
    task.fail("tests failed", 3, T1)
    assert task.status == TaskStatus.FAILED
    assert task.attempts == 2
    assert task.last_error == "tests failed"
    assert task.hold_source is None
    assert task.runnable(T1)


def test_fail_at_budget_holds_for_a_human() -> None:
    task = running_task(attempts=3)
    task.fail("tests failed", 3, T1)
    assert task.status == TaskStatus.HELD
    assert task.hold_source == HoldSource.MACHINE
    assert task.hold_reason is not None
    assert "3 of 3" in task.hold_reason
    assert "tests failed" in task.hold_reason
    assert task.last_error == "tests failed"
    assert not task.runnable(T1)


@pytest.mark.parametrize("max_attempts", [0, -1])
def test_fail_rejects_a_budget_below_one(max_attempts: int) -> None:
    task = running_task()
    before = task.model_dump()
    with pytest.raises(ValueError, match="max_attempts"):
        task.fail("x", max_attempts, T1)
    assert task.model_dump() == before


def test_succeed_is_done_and_keeps_history() -> None:
    task = running_task()
    task.last_error = "earlier failure"
    task.succeed(T1)
    assert task.status == TaskStatus.DONE
    assert task.attempts == 1
    assert task.last_error == "earlier failure"
    assert not task.runnable(T1)


def test_handed_off_is_a_machine_hold_and_the_attempt_stands() -> None:
    task = running_task(attempts=1)
    task.handed_off("PR #7 awaits review", T1)
    assert task.status == TaskStatus.HELD
    assert task.hold_source == HoldSource.MACHINE
    assert task.hold_reason == "PR #7 awaits review"
    assert task.attempts == 1


@pytest.mark.parametrize("status", sorted(RUNNABLE_STATUSES))
def test_hold_is_manual(status: TaskStatus) -> None:
    task = new_task()
    task.status = status
    task.hold("waiting on the API freeze", T1)
    assert task.status == TaskStatus.HELD
    assert task.hold_source == HoldSource.MANUAL
    assert task.hold_reason == "waiting on the API freeze"


@pytest.mark.parametrize("source", list(HoldSource))
def test_release_requeues_with_a_fresh_budget_and_keeps_history(source: HoldSource) -> None:
    task = held_task(source)
    task.run_ids = ["r1", "r2", "r3"]
    task.last_error = "tests failed"
    task.diagnostic = "see payload"
    task.release(T1)
    assert task.status == TaskStatus.QUEUED
    assert task.attempts == 0
    assert task.hold_reason is None
    assert task.hold_source is None
    assert task.run_ids == ["r1", "r2", "r3"]
    assert task.last_error == "tests failed"
    assert task.diagnostic == "see payload"
    assert task.updated_at == T1


Move = Callable[[Task], None]

MOVES: dict[str, Move] = {
    "start": lambda t: t.start(T1),
    "stall": lambda t: t.stall("d", T1),
    "fail": lambda t: t.fail("d", 3, T1),
    "succeed": lambda t: t.succeed(T1),
    "handed_off": lambda t: t.handed_off("d", T1),
    "hold": lambda t: t.hold("d", T1),
    "release": lambda t: t.release(T1),
    "wait_until": lambda t: t.wait_until(T1 + timedelta(hours=1), T1),
    "skip_wait": lambda t: t.skip_wait(T1),
}

ALLOWED: dict[str, set[TaskStatus]] = {
    "start": {TaskStatus.QUEUED, TaskStatus.FAILED},
    "stall": {TaskStatus.RUNNING},
    "fail": {TaskStatus.RUNNING},
    "succeed": {TaskStatus.RUNNING},
    "handed_off": {TaskStatus.RUNNING},
    "hold": {TaskStatus.QUEUED, TaskStatus.FAILED},
    "release": {TaskStatus.HELD},
    "wait_until": {TaskStatus.FAILED},
    "skip_wait": {TaskStatus.QUEUED, TaskStatus.FAILED},
}


def task_in(status: TaskStatus) -> Task:
    if status == TaskStatus.HELD:
        return held_task()
    task = running_task(attempts=1)
    task.status = status
    return task


@pytest.mark.parametrize(
    ("move", "status"),
    [(m, s) for m in MOVES for s in TaskStatus if s not in ALLOWED[m]],
)
def test_refused_moves_raise_and_change_nothing(move: str, status: TaskStatus) -> None:
    task = task_in(status)
    before = task.model_dump()
    with pytest.raises(TaskTransitionError) as caught:
        MOVES[move](task)
    assert caught.value.status == status
    assert caught.value.task_id == "t1"
    assert str(status) in str(caught.value)
    assert task.model_dump() == before


@pytest.mark.parametrize(
    ("move", "status"),
    [(m, s) for m in MOVES for s in TaskStatus if s in ALLOWED[m]],
)
def test_allowed_moves_succeed(move: str, status: TaskStatus) -> None:
    task = task_in(status)
    MOVES[move](task)
    assert task.updated_at == T1


def test_a_naive_now_is_rejected_without_change() -> None:
    task = new_task()
    before = task.model_dump()
    with pytest.raises(ValidationError):
        task.start(datetime(2025, 1, 1, 12, 0))
    assert task.model_dump() == before


def test_a_naive_created_at_is_rejected() -> None:
    with pytest.raises(ValidationError):
        Task.new(id="t", title="t", instruction="i", now=datetime(2025, 1, 1))


def test_negative_attempts_are_rejected() -> None:
    with pytest.raises(ValidationError):
        Task(id="t", title="t", instruction="i", attempts=-1, created_at=T0, updated_at=T0)


def test_persisted_tasks_ignore_unknown_keys() -> None:
    data = new_task().model_dump(mode="json") | {"from_a_newer_version": 1}
    task = Task.model_validate(data)
    assert task == new_task()
    assert Task.model_validate_json(new_task().model_dump_json()) == new_task()


@given(st.lists(st.sampled_from(sorted(MOVES)), max_size=40))
def test_any_sequence_of_moves_keeps_attempts_non_negative(moves: list[str]) -> None:
    task = new_task()
    for move in moves:
        before = task.model_dump()
        try:
            MOVES[move](task)
        except TaskTransitionError:
            assert task.model_dump() == before
        assert task.attempts >= 0
        assert (task.status == TaskStatus.HELD) == (task.hold_source is not None)
        assert (task.status == TaskStatus.HELD) == (task.hold_reason is not None)
        assert task.not_before is None or task.status == TaskStatus.FAILED
