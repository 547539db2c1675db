"""A task whose run is open, as ``task show`` and ``payload show`` say it: in progress while a
process holds the run's lock (or the run has no folder on this machine: a Temporal worker's
elsewhere), and "its process is gone" with the way to close it when its lock is free; never
the ledger's step names (``prep``). In-process through ``assay.cli.main.main``."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.in_process import fresh_repo, run_main

from assay.adapters.store.sql import Ledger
from assay.core.tasks import Task
from assay.engine.local.run_lock import hold_run_lock


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = fresh_repo(tmp_path, monkeypatch)
    (root / ".assay").mkdir()
    with Ledger.open(f"sqlite:///{root / '.assay' / 'assay.db'}") as ledger:
        now = datetime.now(UTC)
        task = Task.new(id="t-open", title="open", instruction="open", now=now)
        ledger.add_task(task)
        task.start(now, run_id="r-open")
        ledger.start_run(task, "r-open")
    return root


assay = run_main


def shown(capsys: pytest.CaptureFixture[str]) -> tuple[str, str, str]:
    """``task show``'s run line and next step, ``--json``'s next, ``payload show``'s refusal."""
    _, out, _ = assay(capsys, "task", "show", "t-open")
    lines = out.splitlines()
    run = next(line for line in lines if line.startswith("  run r-open: "))
    following = next(line for line in lines if line.startswith("next: "))
    _, out, _ = assay(capsys, "task", "show", "t-open", "--json")
    assert json.loads(out)["next"] == following.removeprefix("next: ")
    code, _, err = assay(capsys, "payload", "show", "r-open")
    assert code == 2
    return run.removeprefix("  run r-open: "), following, err


def test_a_run_in_progress(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert shown(capsys) == (  # no folder here: a worker elsewhere may be running it
        "in progress",
        "next: a run is in progress",
        "assay: run r-open has no payload yet: it is in progress\n",
    )
    folder = repo / ".assay" / "runs" / "r-open"
    folder.mkdir(parents=True)
    fd = hold_run_lock(folder)  # this process runs it
    try:
        run, following, _ = shown(capsys)
        assert (run, following) == ("in progress", "next: a run is in progress")
    finally:
        os.close(fd)


def test_a_run_whose_process_is_gone(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = repo / ".assay" / "runs" / "r-open"
    folder.mkdir(parents=True)
    os.close(hold_run_lock(folder))  # the lock its process held, freed as a killed one frees it
    run, following, err = shown(capsys)
    assert run == "open, but its process is gone: `assay run --resume` closes it"
    assert following == (
        "next: its run's process is gone: `assay run --resume` (or `assay serve`) closes the "
        "run and runs the task again"
    )
    assert err == (
        "assay: run r-open has no payload yet: it is open, but its process is gone: "
        "`assay run --resume` closes it\n"
    )
