"""The ledger is the only place a result lives: a run's coder and validator logs are shipped
to it as the run goes (redacted), `assay logs` reads them once the run folder is gone, a
ledger that refuses them is a warning, and recovery ships what a dead run left. Real runs of
the replay coder in a real repository, on a real SQLite ledger."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.fixed_run import run_fixed
from support.repo import Repo, make_repo

from assay.adapters.store.sql import Ledger
from assay.core.contract import Contract
from assay.core.tasks import Task
from assay.core.vocab import LogRole
from assay.engine.local.runner import RunReport, recover_interrupted

TOKEN = "tok-" + "0123456789abcdefghij"  # the operator's credential, printed by the check
CODER_LOG = "attempt-1/seat-1/coder-attempt1.log"
CHECK_LOG = "attempt-1/seat-1/validators/validator-check.log"
NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def _run(repo: Repo, ledger: Ledger) -> RunReport:
    env = {**os.environ, "MY_SERVICE_TOKEN": TOKEN}
    check = f"echo checked-it; echo using {TOKEN}"
    return run_fixed(repo, check, land="branch", ledger=ledger, env=env)


def _ledger(repo: Repo) -> Ledger:
    home = repo.root / ".assay"
    home.mkdir(exist_ok=True)
    return Ledger.open(f"sqlite:///{home / 'assay.db'}")


def test_a_run_s_logs_are_in_the_ledger_and_read_after_its_folder_is_gone(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    ledger = _ledger(repo)
    report = _run(repo, ledger)
    assert report.payload.status.value == "ready", report.warnings
    run_id = report.run_id
    kept = {e.name: e for e in ledger.run_logs(run_id)}
    assert kept[CODER_LOG].role is LogRole.CODER and kept[CODER_LOG].seat == 1
    assert kept[CHECK_LOG].role is LogRole.VALIDATOR and kept[CHECK_LOG].attempt == 1
    check = ledger.run_log(run_id, CHECK_LOG)
    assert check is not None and check.text is not None and "checked-it" in check.text
    assert TOKEN not in check.text and "[REDACTED:$MY_SERVICE_TOKEN]" in check.text

    shutil.rmtree(repo.root / ".assay" / "runs" / run_id)  # another machine's run, as it were
    listed = repo.main("logs", run_id, "--json")
    assert listed.returncode == 0, listed.stderr
    names = {log["name"]: log for log in json.loads(listed.stdout)["logs"]}
    assert names[CHECK_LOG]["source"] == "ledger" and names[CODER_LOG]["role"] == "coder"
    table = repo.main("logs", run_id)
    assert CODER_LOG in table.stdout and "validator" in table.stdout
    shown = repo.main("logs", run_id, CHECK_LOG)
    assert shown.returncode == 0 and "checked-it" in shown.stdout
    assert TOKEN not in shown.stdout
    tail = repo.main("logs", run_id, CHECK_LOG, "--tail", "1")
    assert tail.stdout.count("\n") == 1

    unknown = repo.main("logs", "r-none")
    assert unknown.returncode == 2 and "no run 'r-none'" in unknown.stderr
    missing = repo.main("logs", run_id, "attempt-1/seat-1/nothing.log")
    assert missing.returncode == 2 and "has no log" in missing.stderr


def test_a_run_from_before_is_read_from_its_folder_here(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    ledger = _ledger(repo)
    run_id = _run(repo, ledger).run_id
    with ledger._engine.begin() as conn:  # as a run closed before the ledger kept logs
        conn.exec_driver_sql("DELETE FROM run_logs")
    listed = repo.main("logs", run_id, "--json")
    assert listed.returncode == 0, listed.stderr
    names = {log["name"]: log for log in json.loads(listed.stdout)["logs"]}
    assert names[CODER_LOG]["source"] == "file"
    shown = repo.main("logs", run_id, CHECK_LOG, "--json")
    assert shown.returncode == 0, shown.stderr
    assert "checked-it" in json.loads(shown.stdout)["text"]
    escape = repo.main("logs", run_id, "../../assay.db")
    assert escape.returncode == 2  # only a log of the run folder is ever read


def test_a_ledger_that_refuses_the_logs_is_a_warning_never_a_failed_run(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    ledger = _ledger(repo)

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise OSError("the ledger is down")

    ledger.ship_logs = refuse  # type: ignore[method-assign]
    report = _run(repo, ledger)
    assert report.payload.status.value == "ready"
    assert any("logs were not shipped to the ledger: the ledger is down" in w
               for w in report.warnings)  # fmt: skip


def test_recovery_ships_what_a_dead_run_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_WEB_TOKEN", "web-token-0123456789")
    home = tmp_path / ".assay"
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'assay.db'}")
    task = Task.new(id="t1", title="t", instruction="i", now=NOW)
    ledger.add_task(task)
    task.start(NOW, run_id="r1")
    ledger.start_run(task, "r1", started_at=NOW)
    seat = home / "runs" / "r1" / "attempt-1" / "seat-1"
    seat.mkdir(parents=True)
    # Its coder never finished: only the raw stream is there, and it printed the token.
    (seat / "claude.log.out").write_text("working\nweb-token-0123456789\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    recovered = recover_interrupted(
        repo=tmp_path, home=home, ledger=ledger, contract_for=lambda _id: Contract(task="i"),
        clock=lambda: NOW,
    )  # fmt: skip
    assert recovered == ["r1"]
    log = ledger.run_log("r1", "attempt-1/seat-1/claude.log.out")
    assert log is not None and log.role is LogRole.CODER
    assert log.text.startswith("working\n[REDACTED:") and "web-token" not in log.text
