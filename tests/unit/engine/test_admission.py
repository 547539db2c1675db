"""A setting this machine cannot run never becomes retried work: a queued task is held before
it starts, and a run that meets a missing program mid-way holds its task without spending or
refunding the attempt."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.repo import make_repo

from assay.adapters.sandbox import bwrap_problem
from assay.adapters.store.sql import Ledger
from assay.core.contract import parse_contract
from assay.core.tasks import Task
from assay.core.vocab import EventKind, HoldSource, SettleRow, TaskStatus
from assay.engine.admission import Unrunnable, admit
from assay.engine.local.runner import run_task

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
GONE = "assay-no-such-agent"


def queued(tmp_path: Path, contract_text: str) -> tuple[Path, Path, Ledger, Task]:
    repo = make_repo(tmp_path)
    home = repo.root / ".assay"
    home.mkdir()
    ledger = Ledger.open(f"sqlite:///{home / 'assay.db'}")
    task = Task.new(id="t1", title="t", instruction="Make slugify keep digits.", now=NOW)
    ledger.add_task(task, contract={"task": task.instruction})
    return repo.root, home, ledger, task


def command_contract(command: str, sandbox: str = "none") -> str:
    return (
        "task: Make slugify keep digits.\n"
        f"coder: {{kind: command, command: '{command}'}}\n"
        "validators: [{id: tests, run: 'true'}]\n"
        f"sandbox: {sandbox}\n"
    )


def test_a_program_missing_mid_run_holds_the_task_and_spends_nothing(tmp_path: Path) -> None:
    """The preflight passed elsewhere (a queue worker on another machine, a program removed
    since): the dispatch meets the missing program, and the task is held with the message,
    the attempt given back, no wait set and nothing left to retry."""
    text = command_contract(f"{GONE} --go {{prompt_file}}")
    repo, home, ledger, task = queued(tmp_path, text)
    report = run_task(repo=repo, home=home, ledger=ledger, task=task, contract=parse_contract(text))
    assert report.settlement.row is SettleRow.UNRUNNABLE
    assert not report.settlement.attempt_spent
    payload = report.payload
    assert (payload.status.value, payload.task_status.value) == ("failed", "held")
    assert payload.attempt_spent is False
    assert payload.reason.startswith("this machine cannot run the task as set: seat 1 (command): ")
    assert f"{GONE} not found on PATH" in payload.reason
    [seat] = payload.candidates
    assert not seat.viable and seat.fault is not None and GONE in seat.fault
    held = ledger.get_task("t1")
    assert (held.status, held.hold_source, held.attempts) == (
        TaskStatus.HELD,
        HoldSource.MACHINE,
        0,
    )
    assert held.hold_reason == payload.reason and held.not_before is None
    assert not held.runnable(datetime.now(UTC))
    [run] = ledger.runs("t1")
    assert run.settle_row is SettleRow.UNRUNNABLE
    assert len(ledger.dispatches(run.id)) == 1  # one wave, no recovery meeting it again


@pytest.mark.skipif(bwrap_problem() is not None, reason="needs a working bwrap")
def test_a_program_the_sandbox_hides_mid_run_is_named_with_the_sandbox(tmp_path: Path) -> None:
    script = tmp_path / "newuser" / "fix.sh"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    text = command_contract(str(script), sandbox="bwrap")
    repo, home, ledger, task = queued(tmp_path, text)
    report = run_task(repo=repo, home=home, ledger=ledger, task=task, contract=parse_contract(text))
    assert report.settlement.row is SettleRow.UNRUNNABLE
    reason = report.payload.reason
    assert f"{script} cannot be seen inside the sandbox" in reason
    assert "the sandbox has a private /tmp of its own" in reason and "exit 127" in reason
    assert ledger.get_task("t1").status is TaskStatus.HELD


def test_admit_holds_a_task_this_machine_cannot_run_and_never_starts_it(tmp_path: Path) -> None:
    text = command_contract(f"{GONE} --go")
    repo, home, ledger, task = queued(tmp_path, text)
    with pytest.raises(Unrunnable) as raised:
        admit(
            ledger=ledger,
            task=task,
            contract=parse_contract(text),
            repo=repo,
            home=home,
            now=NOW,
        )
    assert raised.value.problems == [
        f"coder command: {GONE} not found on PATH: install it "
        "(or fix `coder.command` (--coder-command))"
    ]
    held = ledger.get_task("t1")
    assert (held.status, held.hold_source, held.attempts) == (
        TaskStatus.HELD,
        HoldSource.MACHINE,
        0,
    )
    assert held.hold_reason == (
        f"this machine cannot run the task as set: {raised.value.problems[0]}"
    )
    assert ledger.runs("t1") == []
    saved = [e for e in ledger.events("t1") if e.kind == EventKind.TASK_SAVED]
    assert saved[-1].data["reason"] == held.hold_reason and "action" not in saved[-1].data


def test_admit_lets_a_task_this_machine_can_run_through(tmp_path: Path) -> None:
    text = command_contract("true")
    repo, home, ledger, task = queued(tmp_path, text)
    admit(ledger=ledger, task=task, contract=parse_contract(text), repo=repo, home=home, now=NOW)
    assert ledger.get_task("t1").status is TaskStatus.QUEUED


def test_a_dirty_checkout_is_not_a_setting_a_worker_holds_for(tmp_path: Path) -> None:
    """The landing leaves a branch beside a dirty checkout; a worker does not hold for it."""
    text = command_contract("true") + "land: merge\n"
    repo, home, ledger, task = queued(tmp_path, text)
    (repo / "src" / "slug.py").write_text("# being edited\n")
    admit(ledger=ledger, task=task, contract=parse_contract(text), repo=repo, home=home, now=NOW)
    assert ledger.get_task("t1").status is TaskStatus.QUEUED


def test_a_task_moved_meanwhile_is_left_as_it_is(tmp_path: Path) -> None:
    """Cancelled by an operator between the worker's scan and its check: the hold is not
    written over the operator's, and the worker hears "someone else has it"."""
    from assay.adapters.store.errors import LedgerConflict
    from assay.engine.admission import hold_unrunnable

    _, _, ledger, task = queued(tmp_path, command_contract("true"))
    cancelled = ledger.get_task("t1")
    cancelled.hold("cancelled by an operator", NOW)
    ledger.save_task(cancelled)
    with pytest.raises(LedgerConflict):
        hold_unrunnable(ledger, task.id, ["nosuchprog not found"], NOW)
    assert ledger.get_task("t1").hold_reason == "cancelled by an operator"
