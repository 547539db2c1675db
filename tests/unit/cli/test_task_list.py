"""``assay task list`` in-process, by both of its routes: the early reader (``cli.task_list``,
on ``sqlite3`` before typer and SQLAlchemy are imported) and typer's command through the Ledger
(a configured ``ASSAY_DATABASE_URL``, here the same SQLite file). Both print one row type with
one function, so they print the same; what each driver gives is ``test_task_rows``'s. What
only a process shows (the early route's imports, a piped table) is in
``tests/e2e/cli/test_task_quick_e2e.py``."""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.ledger_driver import Driver
from support.repo import Repo, make_repo

from assay.adapters.store.sql import Ledger
from assay.cli import task_list
from assay.core.settle import Verdict
from assay.core.tasks import Task
from assay.core.vocab import RunStatus, TaskStatus

T0 = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
FAR = datetime(2999, 1, 1, tzinfo=UTC)


def _db(repo: Repo) -> Path:
    return repo.root / ".assay" / "assay.db"


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    """A ledger with a unicode title, a held task with a tab in its reason, one that waits for
    its quota, one with runs, and a row a hand made unreadable."""
    made = make_repo(tmp_path)
    with Ledger.open(f"sqlite:///{_db(made)}") as ledger:
        ledger.add_task(Task.new(id="t-uni", title="réparer le 漢字 ✓", instruction="ü", now=T0))
        held = Task.new(id="t-held", title="held one", instruction="x", now=T0)
        held.hold("waiting for the  design\treview", T0 + timedelta(seconds=1))
        ledger.add_task(held)
        driver = Driver(ledger, start=T0 + timedelta(seconds=5))
        driver.add("t-runs")
        driver.cycle("t-runs", "r-1", RunStatus.FAILED, max_attempts=5)
        driver.add("t-wait")
        task = driver.start("t-wait", "r-2")
        verdict = Verdict(status=RunStatus.FAILED, quota_hit=True, no_viable_candidates=True)
        ledger.close_run(driver.close_for(task, "r-2", verdict))
        ledger.change_task("t-wait", lambda t: _wait(t, FAR))
        driver.add("t-zombie")
    with sqlite3.connect(_db(made)) as db:
        db.execute("UPDATE tasks SET status = 'zombie' WHERE id = 't-zombie'")
    return made


def _wait(task: Task, until: datetime) -> dict[str, str]:
    task.wait_until(until, task.updated_at)
    return {}


def _through_ledger(repo: Repo, *args: str) -> tuple[int, str, str]:
    done = repo.main(*args, ASSAY_DATABASE_URL=f"sqlite:///{_db(repo)}")
    return done.returncode, done.stdout, done.stderr


def test_both_routes_print_the_same(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    early: list[list[str]] = []
    real_main = task_list.main

    def noted(args: list[str]) -> int | None:
        code = real_main(args)
        if code is not None:
            early.append(args)
        return code

    monkeypatch.setattr(task_list, "main", noted)
    commands = [["task", "list"], ["task", "list", "--json"]]
    commands += [["task", "list", "--json", "--status", s.value] for s in TaskStatus]
    commands += [["task", "list", "--status", "held"]]
    for args in commands:
        done = repo.main(*args)
        assert early.pop() == args, "the early reader did not answer"
        assert (done.returncode, done.stdout, done.stderr) == _through_ledger(repo, *args), args
        assert not early, "the Ledger's route was answered early"
    listed = json.loads(repo.main("task", "list", "--json").stdout)
    assert [t["id"] for t in listed] == ["t-held", "t-uni", "t-runs", "t-wait", "t-zombie"]
    assert listed[-1]["status"] == "unreadable" and "'zombie'" in listed[-1]["problem"]
    table = repo.main("task", "list").stdout
    assert "t-zombie  unreadable" in table and "waits until 2999-01-01 00:00:00 UTC" in table


def test_task_show_is_the_ledgers(repo: Repo) -> None:
    for args in (["task", "show", "t-runs"], ["ledger", "show", "t-runs", "--json"]):
        assert task_list.main(args) is None, args  # left to typer's command
    code, out, err = _through_ledger(repo, "task", "show", "t-runs")
    assert code == 0 and "usage: none journaled" in out, err
    shown = json.loads(repo.main("task", "show", "t-wait", "--json").stdout)
    assert shown["waiting"] is True and shown["not_before"] == "2999-01-01T00:00:00Z"
    held = repo.main("task", "show", "t-held").stdout
    # Stored text is shown on its line: the tab escaped (and so the reason quoted).
    assert 'held by a human (manual hold): "waiting for the  design\\treview"' in held


def test_what_the_early_reader_cannot_read_goes_to_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path)
    monkeypatch.chdir(repo.root)
    for name in [k for k in os.environ if k.startswith("ASSAY_")]:
        monkeypatch.delenv(name)
    assert task_list.main(["task", "list"]) is None  # no ledger file yet: the Ledger's
    listed = repo.main("task", "list")  # an empty answer, and nothing created
    assert listed.returncode == 0 and not (repo.root / ".assay").exists(), listed.stderr
    Ledger.open(f"sqlite:///{_db(repo)}").close()
    for args in (
        ["task", "list", "--help"],
        ["task", "list", "--status", "sideways"],
        ["task", "list", "--status=held"],
        ["task", "show", "-x"],
        ["task", "show", "a\udc80b"],
    ):
        assert task_list.main(args) is None, args
    assert task_list.main(["task", "list"]) == 0
    with sqlite3.connect(_db(repo)) as db:
        db.execute("UPDATE alembic_version SET version_num = '0099'")  # a newer assay's
    assert task_list.main(["task", "list"]) is None
