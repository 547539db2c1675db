"""`assay run --resume`: one line per recovered run, and an exit code that says what recovery
made of the tasks when nothing is left to run (0 done or runnable, 3 held for a human)."""

from __future__ import annotations

import re
from pathlib import Path

from support.crash import crash_contract
from support.repo import make_repo

from assay.engine.crashpoints import CRASH_EXIT

RUN = r"r\d{8}-\d{6}-[0-9a-f]{6}"
TASK = r"t\d{8}-\d{6}-[0-9a-f]{8}"


def test_a_recovery_that_holds_the_task_exits_3(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    # One refund is the whole streak: the recovered (refunded) interruption holds the task.
    contract = crash_contract(repo, 1, extra="budgets: {max_refunds: 1}\n")
    killed = repo.assay("run", "--contract", str(contract), ASSAY_CRASH_AT="dispatch_started")
    assert killed.returncode == CRASH_EXIT, killed.stderr
    resumed = repo.main("run", "--resume")  # the crash needs a process; the recovery not
    assert resumed.returncode == 3, resumed.stderr
    [line] = [line for line in resumed.stderr.splitlines() if line.startswith("recovered ")]
    assert re.fullmatch(
        rf"recovered {RUN}: held \(task {TASK}\): 1 refunded runs in a row "
        r"\(budgets\.max_refunds: 1\).*interrupted.*",
        line,
    ), line


def test_a_recovered_landing_says_merged_and_exits_0(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = crash_contract(repo, 1)
    killed = repo.assay("run", "--contract", str(contract), ASSAY_CRASH_AT="ref_moved")
    assert killed.returncode == CRASH_EXIT, killed.stderr
    resumed = repo.main("run", "--resume")  # the crash needs a process; the recovery not
    assert resumed.returncode == 0, resumed.stderr
    lines = [line for line in resumed.stderr.splitlines() if line.startswith("recovered ")]
    assert len(lines) == 1 and re.fullmatch(
        rf"recovered {RUN}: merged \(task {TASK} done\)", lines[0]
    )


def test_an_interrupted_run_is_refunded_and_runs_again(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = crash_contract(repo, 1)
    killed = repo.assay("run", "--contract", str(contract), ASSAY_CRASH_AT="dispatch_ended")
    assert killed.returncode == CRASH_EXIT, killed.stderr
    resumed = repo.main("run", "--resume")  # the crash needs a process; the recovery not
    assert resumed.returncode == 0, resumed.stderr  # run again, and merged
    lines = [line for line in resumed.stderr.splitlines() if line.startswith("recovered ")]
    assert len(lines) == 1
    assert re.fullmatch(
        rf"recovered {RUN}: interrupted, refunded \(task {TASK} failed, runnable\)", lines[0]
    )
    # Done now: the interruption is an earlier run's, not the task's last word.
    task_id = re.search(TASK, lines[0]).group(0)  # type: ignore[union-attr]
    shown = repo.main("task", "show", task_id).stdout
    assert "status: done" in shown and "last error" not in shown
    assert "earlier run: interrupted" in shown
