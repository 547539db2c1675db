"""settle(): every row of the table by name, the match order, and the bounds it guarantees."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from assay.core.settle import (
    REFUND_ROWS,
    UNSPENT_ROWS,
    RefundStreak,
    Settlement,
    Verdict,
    non_terminal_detail,
    settle,
    settle_row,
)
from assay.core.tasks import Task, TaskTransitionError
from assay.core.vocab import HoldSource, RunStatus, SettleRow, TaskStatus

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
MAX = 3


def started(prior_attempts: int = 0) -> Task:
    """A task that start() has just put into a run, as settle expects."""
    task = Task.new(id="t1", title="digits", instruction="keep digits", now=NOW)
    task.attempts = prior_attempts
    task.start(NOW)
    return task


@dataclass(frozen=True)
class Row:
    verdict: Verdict
    row: SettleRow
    status: TaskStatus
    hold_source: HoldSource | None
    spent: bool


ROWS: dict[str, Row] = {
    "parked": Row(
        Verdict(status=RunStatus.IMPLEMENTING, parked=True),
        SettleRow.PARKED,
        TaskStatus.FAILED,
        None,
        False,
    ),
    "succeeded_merged": Row(
        Verdict(status=RunStatus.MERGED), SettleRow.SUCCEEDED, TaskStatus.DONE, None, True
    ),
    "succeeded_ready": Row(
        Verdict(status=RunStatus.READY), SettleRow.SUCCEEDED, TaskStatus.DONE, None, True
    ),
    "unrunnable": Row(
        Verdict(status=RunStatus.FAILED, unrunnable=True, no_viable_candidates=True),
        SettleRow.UNRUNNABLE,
        TaskStatus.HELD,
        HoldSource.MACHINE,
        False,
    ),
    "stalled_quota": Row(
        Verdict(status=RunStatus.STALLED, quota_hit=True),
        SettleRow.STALLED_QUOTA,
        TaskStatus.FAILED,
        None,
        False,
    ),
    "failed_quota_no_viable": Row(
        Verdict(status=RunStatus.FAILED, quota_hit=True, no_viable_candidates=True),
        SettleRow.FAILED_QUOTA_NO_VIABLE,
        TaskStatus.FAILED,
        None,
        False,
    ),
    "failed_machine_fault": Row(
        Verdict(status=RunStatus.FAILED, machine_fault=True, no_viable_candidates=True),
        SettleRow.FAILED_MACHINE_FAULT,
        TaskStatus.FAILED,
        None,
        False,
    ),
    "stalled_or_failed_stalled": Row(
        Verdict(status=RunStatus.STALLED),
        SettleRow.STALLED_OR_FAILED,
        TaskStatus.FAILED,
        None,
        True,
    ),
    "stalled_or_failed_failed": Row(
        Verdict(status=RunStatus.FAILED),
        SettleRow.STALLED_OR_FAILED,
        TaskStatus.FAILED,
        None,
        True,
    ),
    "halted": Row(
        Verdict(status=RunStatus.BLOCKED, halted=True),
        SettleRow.HALTED,
        TaskStatus.HELD,
        HoldSource.MACHINE,
        True,
    ),
    "land_refused": Row(
        Verdict(status=RunStatus.BLOCKED, land_refused=True),
        SettleRow.LAND_REFUSED,
        TaskStatus.HELD,
        HoldSource.MACHINE,
        True,
    ),
    "blocked_with_pr": Row(
        Verdict(status=RunStatus.BLOCKED, left_pr=True),
        SettleRow.BLOCKED_WITH_PR,
        TaskStatus.HELD,
        HoldSource.MACHINE,
        True,
    ),
    "blocked": Row(
        Verdict(status=RunStatus.BLOCKED), SettleRow.BLOCKED, TaskStatus.FAILED, None, True
    ),
    "verified_noop": Row(
        Verdict(status=RunStatus.VERIFIED_NOOP),
        SettleRow.VERIFIED_NOOP,
        TaskStatus.HELD,
        HoldSource.MACHINE,
        True,
    ),
    "non_terminal": Row(
        Verdict(status=RunStatus.JUDGING), SettleRow.NON_TERMINAL, TaskStatus.FAILED, None, True
    ),
}


def test_every_row_has_a_case() -> None:
    assert {case.row for case in ROWS.values()} == set(SettleRow)


@pytest.mark.parametrize("name", list(ROWS))
def test_row(name: str) -> None:
    case = ROWS[name]
    task = started()
    assert task.attempts == 1

    result = settle(task, case.verdict, "detail", MAX, NOW)

    assert result == Settlement(row=case.row, new_status=case.status, attempt_spent=case.spent)
    assert task.status == case.status
    assert task.hold_source == case.hold_source
    assert task.attempts == (1 if case.spent else 0)
    assert settle_row(case.verdict) == case.row


@pytest.mark.parametrize(
    "name",
    [n for n, c in ROWS.items() if c.row in {SettleRow.STALLED_OR_FAILED, SettleRow.BLOCKED}],
)
def test_failing_rows_hold_once_the_budget_is_spent(name: str) -> None:
    task = started(prior_attempts=MAX - 1)
    result = settle(task, ROWS[name].verdict, "tests failed", MAX, NOW)
    assert result.new_status == TaskStatus.HELD
    assert result.attempt_spent
    assert task.hold_source == HoldSource.MACHINE
    assert task.attempts == MAX
    assert task.last_error == "tests failed"


def test_refund_rows_stay_failed_even_at_the_budget() -> None:
    task = started(prior_attempts=MAX - 1)
    result = settle(task, Verdict(status=RunStatus.STALLED, quota_hit=True), "quota", MAX, NOW)
    assert result.new_status == TaskStatus.FAILED
    assert task.attempts == MAX - 1


def test_non_terminal_records_where_the_run_stopped() -> None:
    task = started()
    settle(task, Verdict(status=RunStatus.LANDING), "ignored", MAX, NOW)
    assert task.last_error == "the run stopped at `landing` without reaching a terminal status"
    assert task.last_error == non_terminal_detail(RunStatus.LANDING)


@pytest.mark.parametrize("status", [s for s in RunStatus if not s.terminal])
def test_every_non_terminal_status_is_the_non_terminal_row(status: RunStatus) -> None:
    assert settle_row(Verdict(status=status)) == SettleRow.NON_TERMINAL


def test_handoffs_record_the_detail_as_the_hold_reason() -> None:
    task = started()
    settle(task, Verdict(status=RunStatus.BLOCKED, left_pr=True), "PR #7 needs review", MAX, NOW)
    assert task.hold_reason == "PR #7 needs review"


# Match order.


@pytest.mark.parametrize(
    ("verdict", "row"),
    [
        # a refused landing only holds a blocked run; a halt that fired wins over it
        (
            Verdict(status=RunStatus.BLOCKED, land_refused=True, left_pr=True),
            SettleRow.LAND_REFUSED,
        ),
        (Verdict(status=RunStatus.BLOCKED, land_refused=True, halted=True), SettleRow.HALTED),
        (Verdict(status=RunStatus.FAILED, land_refused=True), SettleRow.STALLED_OR_FAILED),
        # parked wins over everything, even a landed run
        (Verdict(status=RunStatus.MERGED, parked=True), SettleRow.PARKED),
        (Verdict(status=RunStatus.BLOCKED, parked=True, halted=True), SettleRow.PARKED),
        # a landed run succeeds whatever else is flagged
        (
            Verdict(status=RunStatus.READY, quota_hit=True, halted=True, left_pr=True),
            SettleRow.SUCCEEDED,
        ),
        # a failed+quota run WITH a viable candidate spends the attempt
        (Verdict(status=RunStatus.FAILED, quota_hit=True), SettleRow.STALLED_OR_FAILED),
        # no viable candidates without a quota hit is ordinary failure
        (
            Verdict(status=RunStatus.FAILED, no_viable_candidates=True),
            SettleRow.STALLED_OR_FAILED,
        ),
        # the no-viable guard is only on the failed row; stalled+quota refunds regardless
        (
            Verdict(status=RunStatus.STALLED, quota_hit=True, no_viable_candidates=True),
            SettleRow.STALLED_QUOTA,
        ),
        # stalled|failed come before halted
        (Verdict(status=RunStatus.STALLED, halted=True), SettleRow.STALLED_OR_FAILED),
        # halted beats blocked+left_pr
        (Verdict(status=RunStatus.BLOCKED, halted=True, left_pr=True), SettleRow.HALTED),
        # halted beats verified_noop and non-terminal
        (Verdict(status=RunStatus.VERIFIED_NOOP, halted=True), SettleRow.HALTED),
        (Verdict(status=RunStatus.PREP, halted=True), SettleRow.HALTED),
        # verified_noop is independent of the quota rows
        (
            Verdict(status=RunStatus.VERIFIED_NOOP, quota_hit=True, no_viable_candidates=True),
            SettleRow.VERIFIED_NOOP,
        ),
        # left_pr only splits the blocked row
        (Verdict(status=RunStatus.FAILED, left_pr=True), SettleRow.STALLED_OR_FAILED),
        # blocked ignores quota
        (Verdict(status=RunStatus.BLOCKED, quota_hit=True), SettleRow.BLOCKED),
        # quota wins over a machine fault in the same wave (it waits for the provider's reset)
        (
            Verdict(
                status=RunStatus.FAILED,
                quota_hit=True,
                machine_fault=True,
                no_viable_candidates=True,
            ),
            SettleRow.FAILED_QUOTA_NO_VIABLE,
        ),
        # a machine fault only refunds a failed run: stalled or blocked runs are not faults
        (Verdict(status=RunStatus.STALLED, machine_fault=True), SettleRow.STALLED_OR_FAILED),
        (Verdict(status=RunStatus.BLOCKED, machine_fault=True), SettleRow.BLOCKED),
        # a refused landing only holds a blocked run; a halt that fired wins over it
        (
            Verdict(status=RunStatus.BLOCKED, land_refused=True, left_pr=True),
            SettleRow.LAND_REFUSED,
        ),
        (Verdict(status=RunStatus.BLOCKED, land_refused=True, halted=True), SettleRow.HALTED),
        (Verdict(status=RunStatus.FAILED, land_refused=True), SettleRow.STALLED_OR_FAILED),
        # parked wins over everything
        (Verdict(status=RunStatus.FAILED, parked=True, machine_fault=True), SettleRow.PARKED),
        # a setting this machine lacks wins over quota and machine faults (waiting cannot fix
        # it), but not over a landed run or a parked one
        (
            Verdict(
                status=RunStatus.FAILED,
                unrunnable=True,
                quota_hit=True,
                machine_fault=True,
                no_viable_candidates=True,
            ),
            SettleRow.UNRUNNABLE,
        ),
        (Verdict(status=RunStatus.STALLED, unrunnable=True, quota_hit=True), SettleRow.UNRUNNABLE),
        (Verdict(status=RunStatus.BLOCKED, unrunnable=True, halted=True), SettleRow.UNRUNNABLE),
        (Verdict(status=RunStatus.MERGED, unrunnable=True), SettleRow.SUCCEEDED),
        (Verdict(status=RunStatus.FAILED, unrunnable=True, parked=True), SettleRow.PARKED),
    ],
)
def test_match_order(verdict: Verdict, row: SettleRow) -> None:
    assert settle_row(verdict) == row


def test_failed_quota_with_a_viable_candidate_spends_the_attempt() -> None:
    task = started()
    result = settle(task, Verdict(status=RunStatus.FAILED, quota_hit=True), "lost", MAX, NOW)
    assert result.attempt_spent
    assert task.attempts == 1


# Refused settles.


@pytest.mark.parametrize("status", [s for s in TaskStatus if s != TaskStatus.RUNNING])
def test_settle_refuses_a_task_that_is_not_running(status: TaskStatus) -> None:
    task = started()
    task.status = status
    before = task.model_dump()
    with pytest.raises(TaskTransitionError, match="settle"):
        settle(task, Verdict(status=RunStatus.MERGED), "d", MAX, NOW)
    assert task.model_dump() == before


def test_settle_refuses_a_budget_below_one() -> None:
    task = started()
    before = task.model_dump()
    with pytest.raises(ValueError, match="max_attempts"):
        settle(task, Verdict(status=RunStatus.MERGED), "d", 0, NOW)
    assert task.model_dump() == before


def test_verdict_is_frozen_and_strict() -> None:
    verdict = Verdict(status=RunStatus.MERGED)
    with pytest.raises(ValidationError):
        verdict.parked = True  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Verdict.model_validate({"status": "merged", "unknown": True})
    with pytest.raises(ValidationError):
        Verdict.model_validate({"status": "exploded"})
    assert Verdict.model_validate({"status": "ready"}).status == RunStatus.READY


# Properties.


def test_the_refund_rows_are_the_four_machine_facts() -> None:
    assert {
        SettleRow.PARKED,
        SettleRow.STALLED_QUOTA,
        SettleRow.FAILED_QUOTA_NO_VIABLE,
        SettleRow.FAILED_MACHINE_FAULT,
    } == REFUND_ROWS
    assert REFUND_ROWS | {SettleRow.UNRUNNABLE} == UNSPENT_ROWS


def test_an_unrunnable_run_holds_with_its_problems_and_gives_the_attempt_back() -> None:
    task = started(prior_attempts=MAX - 1)
    why = "seat 1 (claude): claude not found on PATH: install it with `npm i`"
    verdict = Verdict(status=RunStatus.FAILED, unrunnable=True, no_viable_candidates=True)
    result = settle(task, verdict, why, MAX, NOW, refunds=RefundStreak(count=0))
    assert result == Settlement(
        row=SettleRow.UNRUNNABLE, new_status=TaskStatus.HELD, attempt_spent=False
    )
    assert (task.hold_source, task.hold_reason, task.last_error) == (HoldSource.MACHINE, why, why)
    assert task.attempts == MAX - 1 and task.not_before is None
    assert not task.runnable(NOW)


def test_a_task_the_machine_cannot_run_is_held_before_a_run_without_touching_attempts() -> None:
    task = Task.new(id="t1", title="digits", instruction="keep digits", now=NOW)
    task.attempts = 2
    task.status = TaskStatus.FAILED
    task.cannot_run("no key", NOW)
    assert (task.status, task.hold_source, task.hold_reason) == (
        TaskStatus.HELD,
        HoldSource.MACHINE,
        "no key",
    )
    assert task.attempts == 2
    with pytest.raises(TaskTransitionError):
        task.cannot_run("again", NOW)  # held already: nothing to hold


verdicts = st.builds(
    Verdict,
    status=st.sampled_from(list(RunStatus)),
    left_pr=st.booleans(),
    quota_hit=st.booleans(),
    parked=st.booleans(),
    no_viable_candidates=st.booleans(),
    machine_fault=st.booleans(),
    land_refused=st.booleans(),
    halted=st.booleans(),
    unrunnable=st.booleans(),
)
budgets = st.integers(min_value=1, max_value=5)


@given(
    st.lists(st.one_of(verdicts, st.just("release"), st.just("hold")), max_size=60),
    budgets,
)
def test_attempts_never_go_negative(steps: list[Verdict | str], max_attempts: int) -> None:
    task = Task.new(id="t", title="t", instruction="i", now=NOW)
    for step in steps:
        if step == "release":
            if task.status == TaskStatus.HELD:
                task.release(NOW)
        elif step == "hold":
            if task.runnable(NOW):
                task.hold("operator", NOW)
        elif isinstance(step, Verdict) and task.runnable(NOW):
            task.start(NOW)
            settle(task, step, "d", max_attempts, NOW)
        assert task.attempts >= 0


@given(verdicts, st.integers(min_value=0, max_value=10), budgets)
def test_only_machine_fact_rows_refund(verdict: Verdict, prior: int, max_attempts: int) -> None:
    task = started(prior_attempts=prior)
    before = task.attempts
    result = settle(task, verdict, "d", max_attempts, NOW)
    assert result.attempt_spent == (result.row not in UNSPENT_ROWS)
    assert task.attempts == (before if result.attempt_spent else before - 1)
    assert result.new_status == task.status


@given(verdicts, st.integers(min_value=0, max_value=10), budgets, st.integers(0, 10))
def test_a_setting_the_machine_lacks_is_never_retried(
    verdict: Verdict, prior: int, max_attempts: int, streak: int
) -> None:
    """Whatever else the run says (quota, a fault, a halt, a PR), a run that met a setting this
    machine cannot run and neither landed nor was parked holds the task for the operator, with
    the problem as its reason, and never spends the attempt: no refund-and-wait, no retry."""
    task = started(prior_attempts=prior)
    before = task.attempts
    result = settle(
        task,
        verdict.model_copy(update={"unrunnable": True}),
        "codex not found on PATH",
        max_attempts,
        NOW,
        refunds=RefundStreak(count=streak),
        max_refunds=3,
    )
    if verdict.parked or verdict.status in (RunStatus.MERGED, RunStatus.READY):
        assert result.row is not SettleRow.UNRUNNABLE
        return
    assert result.row is SettleRow.UNRUNNABLE
    assert (task.status, task.hold_source) == (TaskStatus.HELD, HoldSource.MACHINE)
    assert task.hold_reason == "codex not found on PATH" and not task.runnable(NOW)
    assert not result.attempt_spent and task.attempts == before - 1


@given(st.lists(verdicts, max_size=80), budgets)
def test_spent_attempts_never_exceed_the_budget(verdicts: list[Verdict], max_attempts: int) -> None:
    task = Task.new(id="t", title="t", instruction="i", now=NOW)
    spent = 0
    for verdict in verdicts:
        if not task.runnable(NOW):
            break
        task.start(NOW)
        if settle(task, verdict, "d", max_attempts, NOW).attempt_spent:
            spent += 1
        assert spent <= max_attempts
        assert task.attempts == spent
        if spent == max_attempts:
            assert task.status in {TaskStatus.HELD, TaskStatus.DONE}
    if task.status == TaskStatus.HELD:
        assert task.hold_source == HoldSource.MACHINE


def test_a_task_that_keeps_failing_is_held_after_exactly_max_attempts() -> None:
    task = Task.new(id="t", title="t", instruction="i", now=NOW)
    statuses = []
    while task.runnable(NOW):
        task.start(NOW)
        statuses.append(settle(task, Verdict(status=RunStatus.FAILED), "red", MAX, NOW).new_status)
    assert statuses == [TaskStatus.FAILED, TaskStatus.FAILED, TaskStatus.HELD]
    task.release(NOW)
    assert task.runnable(NOW)
    assert task.attempts == 0


# A run its own user stopped: refunded, and the task held (manual) until released.

STOPPED = "stopped by the user (Ctrl-C)"


def test_a_parked_run_its_user_stopped_holds_the_task() -> None:
    task = started(prior_attempts=1)
    result = settle(task, ROWS["parked"].verdict, "interrupted: SIGINT", MAX, NOW, stopped=STOPPED)
    assert (result.row, result.new_status, result.attempt_spent) == (
        SettleRow.PARKED,
        TaskStatus.HELD,
        False,
    )
    assert (task.hold_source, task.hold_reason) == (HoldSource.MANUAL, STOPPED)
    assert task.attempts == 1 and task.last_error == "interrupted: SIGINT"
    assert not task.runnable(NOW)
    task.release(NOW)
    assert task.runnable(NOW)


def test_a_stop_at_the_end_of_a_refund_streak_is_still_the_users_hold() -> None:
    task = started()
    streak = RefundStreak(count=5, faults=("503",) * 5)
    settle(task, ROWS["parked"].verdict, "x", MAX, NOW, refunds=streak, stopped=STOPPED)
    assert (task.hold_source, task.hold_reason) == (HoldSource.MANUAL, STOPPED)


@pytest.mark.parametrize("name", [n for n in ROWS if n != "parked"])
def test_a_stop_changes_no_other_row(name: str) -> None:
    """A run that landed, or that a halt or a machine fault settled, before the stop took
    effect is settled as that row says."""
    plain, stopped = started(), started()
    settle(plain, ROWS[name].verdict, "d", MAX, NOW)
    settle(stopped, ROWS[name].verdict, "d", MAX, NOW, stopped=STOPPED)
    assert stopped == plain


# The refund streak: refunds are bounded by max_refunds.

REFUNDED = Verdict(status=RunStatus.FAILED, machine_fault=True, no_viable_candidates=True)


def test_a_refund_below_the_streak_limit_stays_failed() -> None:
    task = started()
    streak = RefundStreak(count=1, faults=("llm: HTTP 503, 3 of 3 calls",))
    result = settle(task, REFUNDED, "again", MAX, NOW, refunds=streak, max_refunds=3)
    assert (result.new_status, result.attempt_spent) == (TaskStatus.FAILED, False)
    assert task.attempts == 0 and task.hold_reason is None


def test_the_refund_that_completes_the_streak_holds_with_the_faults() -> None:
    task = started()
    streak = RefundStreak(count=2, faults=("first 503", "second 503"))
    result = settle(task, REFUNDED, "third 503", MAX, NOW, refunds=streak, max_refunds=3)
    assert (result.row, result.new_status) == (SettleRow.FAILED_MACHINE_FAULT, TaskStatus.HELD)
    assert not result.attempt_spent and task.attempts == 0
    assert task.hold_source is HoldSource.MACHINE
    assert task.hold_reason is not None
    assert task.hold_reason.startswith("3 refunded runs in a row (budgets.max_refunds: 3)")
    for fault in ("first 503", "second 503", "third 503"):
        assert fault in task.hold_reason


@pytest.mark.parametrize("name", [n for n, c in ROWS.items() if c.row in REFUND_ROWS])
def test_every_refund_row_counts_towards_the_streak(name: str) -> None:
    task = started()
    settle(
        task, ROWS[name].verdict, "fault", MAX, NOW, refunds=RefundStreak(count=4), max_refunds=5
    )
    assert task.status is TaskStatus.HELD


def test_a_spent_run_does_not_hold_on_the_streak() -> None:
    task = started()
    result = settle(
        task, Verdict(status=RunStatus.BLOCKED), "tests", MAX, NOW, refunds=RefundStreak(count=9)
    )
    assert result.new_status is TaskStatus.FAILED


def test_settle_refuses_max_refunds_below_one() -> None:
    task = started()
    with pytest.raises(ValueError, match="max_refunds"):
        settle(task, REFUNDED, "d", MAX, NOW, max_refunds=0)
    assert task.status is TaskStatus.RUNNING


def test_the_streak_counts_refunded_runs_after_the_last_spent_one() -> None:
    rows = [
        (SettleRow.FAILED_MACHINE_FAULT, "a"),
        (SettleRow.BLOCKED, "tests"),
        (SettleRow.PARKED, "interrupted"),
        (SettleRow.STALLED_QUOTA, None),
    ]
    assert RefundStreak.of(rows) == RefundStreak(count=2, faults=("interrupted", "stalled_quota"))
    assert RefundStreak.of([*rows, (SettleRow.SUCCEEDED, "ok")]).count == 0
    assert RefundStreak.of([]).count == 0


@given(
    st.lists(st.one_of(verdicts, st.just("release")), max_size=60),
    st.integers(min_value=1, max_value=5),
)
def test_no_refund_streak_exceeds_max_refunds_without_a_hold(
    steps: list[Verdict | str], max_refunds: int
) -> None:
    """Run the task through any sequence of verdicts, reading the streak back from the
    history of settle rows since the last release as the engine does: the task is never
    refunded more than ``max_refunds`` times in a row without being held."""
    task = Task.new(id="t", title="t", instruction="i", now=NOW)
    history: list[tuple[SettleRow | None, str | None]] = []
    for step in steps:
        if step == "release":
            if task.status == TaskStatus.HELD:
                task.release(NOW)
                history = []
            continue
        assert isinstance(step, Verdict)
        if not task.runnable(NOW):
            continue
        task.start(NOW)
        streak = RefundStreak.of(history)
        result = settle(task, step, "d", 1000, NOW, refunds=streak, max_refunds=max_refunds)
        history.append((result.row, "d"))
        in_a_row = RefundStreak.of(history).count
        assert in_a_row <= max_refunds
        if result.row in REFUND_ROWS and in_a_row == max_refunds:
            assert task.status is TaskStatus.HELD and task.hold_source is HoldSource.MACHINE
