"""A task whose ``assay run`` its user stopped stays stopped: a stop that came before the run
opened, before a queued task started or while the run closed holds the task (manual, "stopped
by the user (Ctrl-C)"), a landed run stays done, and the close holds the task only when its
user stopped it (a run that died any other way keeps its recovery: refunded, runnable).

In-process through ``assay.cli.main.main``, the stop recorded as the signal handler records
it; the real signals (SIGINT / SIGTERM delivered to a running ``assay run`` or ``serve``) are
tests/e2e/cli/test_stopped.py."""

from __future__ import annotations

import signal
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.in_process import fresh_repo, ledger_of, run_main
from support.stopping import CTRL_C, only_task

from assay.adapters import process
from assay.adapters.store.sql import Ledger
from assay.core.contract import Contract
from assay.core.tasks import Task
from assay.core.vocab import EventKind, HoldSource, TaskStatus
from assay.engine.local.interrupt import UserStop
from assay.engine.recovery.close import close_unfinished


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return fresh_repo(tmp_path, monkeypatch)


assay = run_main


def test_a_stop_before_the_run_opens_holds_the_new_task_too(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    process._stop.append(signal.SIGINT)  # arrived while the task was being queued
    code, _, err = assay(capsys, "run", "do it", "--coder", "command", "--coder-command", "true")
    assert code == 130, err
    task = only_task(repo)
    assert (task.status, task.hold_reason, task.run_ids) == (TaskStatus.HELD, CTRL_C, [])
    assert f"task {task.id}: not started; held: {CTRL_C}" in err


def test_a_stop_holds_the_tasks_it_kept_from_running(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``run --task`` of a task queued earlier: stopped before it started, it is held too;
    a done task given again is left done."""
    added = assay(capsys, "task", "add", "later", "--coder", "command", "--coder-command", "true")
    assert added[0] == 0, added[2]
    task_id = only_task(repo).id
    process._stop.append(signal.SIGTERM)
    code, _, err = assay(capsys, "run", "--task", task_id)
    assert code == 143, err
    assert only_task(repo).hold_reason == "stopped by the user (SIGTERM)"


def test_a_run_that_ends_runnable_as_the_stop_comes_is_held_too(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stop came after the run's last boundary (while it closed): the run ends as it
    would have (failed, runnable), and its task is held all the same."""
    from assay.engine.local import runner

    real = runner.run_task

    def stopped_while_closing(**kwargs: object) -> object:
        report = real(**kwargs)  # type: ignore[arg-type]
        process._stop.append(signal.SIGINT)
        return report

    monkeypatch.setattr(runner, "run_task", stopped_while_closing)
    flags = ["--coder-command", "echo b > b.txt", "--validator", "false", "--sandbox", "none"]
    code, out, err = assay(capsys, "run", "do it", "--coder", "command", *flags)
    assert code == 130, err
    task = only_task(repo)
    assert f"task {task.id}: failed" in out  # what the run made of it, said first
    assert f"task {task.id}: its run ended as it was stopped; held: {CTRL_C}" in err
    assert (task.status, task.hold_reason) == (TaskStatus.HELD, CTRL_C)


def test_a_run_that_landed_as_the_stop_came_stays_done(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from assay.engine.local import runner

    real = runner.run_task

    def stopped_while_closing(**kwargs: object) -> object:
        report = real(**kwargs)  # type: ignore[arg-type]
        process._stop.append(signal.SIGINT)
        return report

    monkeypatch.setattr(runner, "run_task", stopped_while_closing)
    flags = ["--coder-command", "echo b > b.txt", "--validator", "true", "--sandbox", "none"]
    code, _, err = assay(capsys, "run", "do it", "--coder", "command", *flags, "--land", "merge")
    assert code == 130, err
    assert only_task(repo).status is TaskStatus.DONE
    assert "held" not in err


# -- the close itself: held only when its user stopped it ------------------------------------


START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def open_run(repo: Path) -> Ledger:
    ledger = ledger_of(repo)
    task = Task.new(id="t1", title="t", instruction="i", now=START)
    ledger.add_task(task)
    task.start(START, run_id="r1")
    ledger.start_run(task, "r1", started_at=START)
    return ledger


def close(repo: Path, ledger: Ledger, stopped: UserStop | None) -> Task:
    close_unfinished(
        repo=repo,
        home=repo / ".assay",
        ledger=ledger,
        record=ledger.get_run("r1"),
        contract=Contract(task="i"),
        reason="interrupted: assay was stopped by SIGINT",
        clock=lambda: START,
        stopped=stopped,
    )
    return ledger.get_task("t1")


def test_a_run_closed_for_its_user_holds_its_task_in_the_close(
    repo: Path, open_run: Ledger
) -> None:
    task = close(repo, open_run, UserStop(signal.SIGINT, "ann@box", "cli"))
    assert (task.status, task.hold_source, task.hold_reason) == (
        TaskStatus.HELD,
        HoldSource.MANUAL,
        CTRL_C,
    )
    kinds = [e.kind for e in open_run.events(run_id="r1")]
    assert kinds[-3:] == [EventKind.RUN_INTERRUPTED, EventKind.TASK_SAVED, EventKind.RUN_CLOSED]
    closed = open_run.events(run_id="r1")[-1].data
    assert (closed["task_status"], closed["attempt_spent"]) == ("held", False)


def test_a_run_that_died_keeps_its_recovery(repo: Path, open_run: Ledger) -> None:
    """Not stopped by its user (a crash, a machine fault, serve's queue): refunded, runnable."""
    task = close(repo, open_run, None)
    assert (task.status, task.attempts, task.hold_reason) == (TaskStatus.FAILED, 0, None)
    assert task.runnable(START)
    assert EventKind.TASK_SAVED not in [e.kind for e in open_run.events(run_id="r1")]
