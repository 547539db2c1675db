"""A task whose ``assay run`` its user stopped (SIGINT / SIGTERM) stays stopped: the run closes
as interrupted (refunded), the task is held (manual, "stopped by the user (Ctrl-C)") in the
same transaction, ``serve`` does not pick it up, and ``task release`` queues it again. The
command still exits 130 / 143 and says how to run the task again. A stopped ``serve`` closes
its run as interrupted and leaves the task runnable.

The coder or validator (``--sandbox none``) sends a real signal to this process, as a
terminal's Ctrl-C would reach ``assay run``: signals stay in the e2e tier. The stops that need
no signal are tests/unit/cli/test_stopped.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.in_process import fresh_repo, ledger_of, run_main
from support.stopping import only_task

from assay.adapters import process
from assay.core.vocab import EventKind, HoldSource, RunStatus, TaskStatus


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return fresh_repo(tmp_path, monkeypatch)


assay = run_main


KILL = f"kill -{{sig}} {os.getpid()}; sleep 30"


@pytest.mark.parametrize(
    ("where", "sig", "code", "how"),
    [
        ("coder", "INT", 130, "Ctrl-C"),
        ("validator", "INT", 130, "Ctrl-C"),
        ("validator", "TERM", 143, "SIGTERM"),
    ],
)
def test_a_run_its_user_stops_leaves_its_task_held(
    repo: Path, capsys: pytest.CaptureFixture[str], where: str, sig: str, code: int, how: str
) -> None:
    kill = KILL.format(sig=sig)
    coder = kill if where == "coder" else "echo b > b.txt"
    validator = kill if where == "validator" else "true"
    flags = ["--coder", "command", "--coder-command", coder, "--validator", validator]
    exit_code, out, err = assay(capsys, "run", "do it", *flags, "--sandbox", "none", "--json")
    assert exit_code == code, err
    task = only_task(repo)
    reason = f"stopped by the user ({how})"
    assert (task.status, task.hold_source, task.hold_reason) == (
        TaskStatus.HELD,
        HoldSource.MANUAL,
        reason,
    )
    assert task.attempts == 0  # refunded: the stop says nothing about the task
    assert f"the task is held: {reason}" in err
    assert f"\nto run it again: assay task release {task.id} (then assay run --task" in err
    assert "runnable again" not in err and "Traceback" not in err
    assert "could not be captured" not in err  # no collector started only to be stopped
    payload = json.loads(out)
    assert (payload["task_status"], payload["attempt_spent"]) == ("held", False)
    with ledger_of(repo) as ledger:
        (run,) = ledger.runs(task.id)
        assert not run.open and run.status is RunStatus.FAILED
        saved = [e.data for e in ledger.events(task.id) if e.kind is EventKind.TASK_SAVED]
    assert saved[-1]["action"] == "hold" and saved[-1]["reason"] == reason
    assert saved[-1]["via"] == "cli" and "@" in saved[-1]["by"]

    # serve leaves it alone; release queues it again
    process._stop.clear()
    served = assay(capsys, "serve", "--once", "--no-web", "--poll", "0.1")
    assert served[0] == 0, served[2]
    assert only_task(repo).status is TaskStatus.HELD
    with ledger_of(repo) as ledger:
        assert len(ledger.runs(task.id)) == 1
    released = assay(capsys, "task", "release", task.id)
    assert released[0] == 0 and only_task(repo).status is TaskStatus.QUEUED


def test_a_stopped_serve_says_its_tasks_run_again_in_the_words_run_uses(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["--coder", "command", "--coder-command", KILL.format(sig="INT"), "--sandbox", "none"]
    added = assay(capsys, "task", "add", "do it", *flags, "--validator", "true")
    assert added[0] == 0, added[2]
    code, _, err = assay(capsys, "serve", "--once", "--no-web", "--poll", "0.1")
    assert code == 130, err
    task = only_task(repo)
    assert (task.status, task.attempts) == (TaskStatus.FAILED, 0)  # the queue stopped, not it
    assert (
        f"task {task.id}: interrupted by SIGINT; the run closed as interrupted (refunded, this "
        "run does not count) and the task is failed, runnable again\n"
    ) in err


def test_a_stop_while_the_moved_base_is_revalidated_interrupts_the_run(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """main moves during the run, so the landing checks the combined tree again; a SIGTERM
    then stops its validator, and a check the stop ended blocks nothing: the run is
    interrupted (refunded), never closed as blocked by its validators, and main is theirs."""
    theirs = (
        f"echo b > b.txt; echo theirs > {repo}/theirs.txt; git -C {repo} add theirs.txt; "
        f"git -C {repo} -c user.name=o -c user.email=o@example.org commit -q -m theirs"
    )
    # Only the combined tree has theirs.txt: the first check passes, the second is stopped.
    check = f"if [ -f theirs.txt ]; then {KILL.format(sig='TERM')}; fi"
    flags = ["--coder", "command", "--coder-command", theirs, "--validator", check]
    exit_code, out, err = assay(
        capsys, "run", "do it", *flags, "--sandbox", "none", "--land", "merge", "--json"
    )
    assert exit_code == 143, err
    task = only_task(repo)
    assert task.status is TaskStatus.HELD and task.attempts == 0, err
    with ledger_of(repo) as ledger:
        (run,) = ledger.runs(task.id)
        assert not run.open and run.status is RunStatus.FAILED
    assert json.loads(out)["reason"] == "interrupted: assay was stopped by SIGTERM"
    assert (repo / "theirs.txt").exists() and not (repo / "b.txt").exists()
