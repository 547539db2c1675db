"""Recovery on a ledger several machines share closes only its own home's dead runs: a run
with no folder here runs elsewhere (alive as far as anyone here can tell), and a run of
another repository's task is that repository's to close."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

from assay.adapters.store.sql import Ledger
from assay.core.contract import Contract
from assay.core.tasks import Task
from assay.engine.recovery.close import recover_interrupted

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def started(ledger: Ledger, task_id: str, run_id: str, repository: str | None = None) -> None:
    task = Task.new(id=task_id, title="t", instruction="i", now=NOW, repository=repository)
    ledger.add_task(task)
    task.start(NOW, run_id=run_id)
    ledger.start_run(task, run_id, started_at=NOW)


def test_only_this_homes_dead_runs_of_this_repository_are_closed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@e",
         "commit", "-q", "--allow-empty", "-m", "base"],
        check=True,
    )  # fmt: skip
    home = repo / ".assay"
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'assay.db'}")
    ledger.migrate()
    started(ledger, "mine", "r-mine")
    started(ledger, "remote", "r-remote")  # another machine's: no folder here
    started(ledger, "other", "r-other", repository="example.com/other/project")
    for run_id in ("r-mine", "r-other"):
        (home / "runs" / run_id).mkdir(parents=True)

    recovered = recover_interrupted(
        repo=repo,
        home=home,
        ledger=ledger,
        contract_for=lambda _id: Contract(task="i"),
        is_alive=lambda _folder: False,
        clock=lambda: NOW,
    )

    assert recovered == ["r-mine"]
    assert [ledger.get_run(r).open for r in ("r-mine", "r-remote", "r-other")] == [
        False,
        True,
        True,
    ]
