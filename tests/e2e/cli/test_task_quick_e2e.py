"""``task list`` prints the same on the quick sqlite3 path as through the Ledger, on one ledger
with every kind of task; piped tables keep whole ids. ``task show`` and ``ledger show`` (which
sum the usage journal) are left to the Ledger.

The quick path is :func:`assay.cli.task_list.main` (the entry point offers it ``task list``
before typer); a configured database URL (``ASSAY_DATABASE_URL``, here the same SQLite file)
makes the real command answer through the Ledger only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.repo import ASSAY, Repo, make_repo

from assay.adapters.store.sql import Ledger
from assay.core.settle import Verdict
from assay.core.tasks import Task
from assay.core.vocab import AttemptOutcome, RunStatus, TaskStatus

sys.path.insert(0, str(Path(__file__).parents[2] / "support"))

from ledger_driver import Driver, Wave

HEAVY = ("sqlalchemy", "pydantic", "typer", "rich", "alembic", "yaml")
HEAVY_ENV = "QUICK_TEST_HEAVY"
# Run in a child: the quick path's answer (99: it left the command to typer), then which of
# the modules named in $QUICK_TEST_HEAVY it imported, on stderr's last line.
QUICK = """
import os, sys
from assay.cli.task_list import main
code = main(sys.argv[1:])
named = set(os.environ.get("QUICK_TEST_HEAVY", "").split(","))
heavy = sorted({m.split(".")[0] for m in sys.modules} & named)
sys.stderr.write("\\nHEAVY " + ",".join(heavy) + "\\n")
sys.exit(99 if code is None else code)
"""
LONG_ID = "t20261202-000000-" + "a" * 90  # a table of it is wider than any terminal
FAR = datetime(2999, 1, 1, tzinfo=UTC)


def build(repo: Repo) -> dict[str, str]:
    """A ledger with a queued task with a unicode title, a held one with a reason, one that
    waits for its quota, a failed one with runs (and laps), and one whose times have
    microseconds; returns their ids by role."""
    t0 = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    with Ledger.open(f"sqlite:///{repo.root / '.assay' / 'assay.db'}") as ledger:
        ledger.add_task(
            Task.new(id=LONG_ID, title="réparer le 漢字 bug ✓", instruction="ünï\ncode", now=t0)
        )
        held = Task.new(id="t-held", title="held one", instruction="x", now=t0)
        held.hold("waiting for the  design\treview", t0 + timedelta(seconds=1))
        ledger.add_task(held)
        micro = t0 + timedelta(microseconds=120000)
        ledger.add_task(Task.new(id="t-micro", title="micro", instruction="y", now=micro))
        driver = Driver(ledger, start=t0 + timedelta(seconds=5))
        driver.add("t-runs")
        waves = (
            Wave(AttemptOutcome.BLOCKED, 2, ("test_a failed",)),
            Wave(AttemptOutcome.BLOCKED, 1, ("test_a   failed",)),
        )
        driver.cycle("t-runs", "r-1", RunStatus.FAILED, waves, max_attempts=5, judge_calls=1)
        driver.cycle("t-runs", "r-2", RunStatus.FAILED, waves, max_attempts=5)
        driver.add("t-wait")
        task = driver.start("t-wait", "r-3")
        verdict = Verdict(status=RunStatus.FAILED, quota_hit=True, no_viable_candidates=True)
        ledger.close_run(driver.close_for(task, "r-3", verdict))
        ledger.change_task("t-wait", lambda t: _wait(t, FAR))
    return {"long": LONG_ID, "held": "t-held", "micro": "t-micro", "runs": "t-runs"}


def _wait(task: Task, until: datetime) -> dict[str, str]:
    task.wait_until(until, task.updated_at)
    return {}


def quick(repo: Repo, *args: str, heavy: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", QUICK, *args],
        cwd=repo.root,
        capture_output=True,
        text=True,
        check=False,
        env={**_env(), HEAVY_ENV: heavy},
    )


def through_ledger(repo: Repo, *args: str) -> subprocess.CompletedProcess[str]:
    db = repo.root / ".assay" / "assay.db"  # a configured URL is read by the Ledger only
    url = {"ASSAY_DATABASE_URL": f"sqlite:///{db}"} if db.is_file() else {}
    return subprocess.run(
        [str(ASSAY), *args],
        cwd=repo.root,
        capture_output=True,
        text=True,
        check=False,
        env={**_env(), **url},
    )


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}


@pytest.fixture(scope="module")
def ledger_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Repo, dict[str, str]]:
    repo = make_repo(tmp_path_factory.mktemp("quick"))
    return repo, build(repo)


def _commands() -> list[list[str]]:
    commands = [["task", "list"], ["task", "list", "--json"]]
    commands += [["task", "list", "--status", s.value] for s in TaskStatus]
    commands += [["task", "list", "--json", "--status", "held"]]
    return commands


def test_both_paths_print_the_same(ledger_repo: tuple[Repo, dict[str, str]]) -> None:
    repo, _ids = ledger_repo
    for args in _commands():
        fast = quick(repo, *args)
        reference = through_ledger(repo, *args)
        said = fast.stderr.rpartition("\nHEAVY ")[0]
        assert fast.returncode != 99, (args, "the quick path did not answer", fast.stderr)
        assert (fast.returncode, fast.stdout, said) == (
            reference.returncode,
            reference.stdout,
            reference.stderr,
        ), args
    shown = json.loads(through_ledger(repo, "task", "show", "t-wait", "--json").stdout)
    assert shown["waiting"] is True and shown["not_before"] == "2999-01-01T00:00:00Z"
    listed = json.loads(through_ledger(repo, "task", "list", "--json").stdout)
    assert {t["id"]: t["created_at"] for t in listed}["t-micro"] == "2026-03-04T05:06:07.120000Z"
    held = through_ledger(repo, "task", "show", "t-held").stdout
    # Stored text is shown on its line: the tab escaped (and so the reason quoted).
    assert 'held by a human (manual hold): "waiting for the  design\\treview"' in held


def test_show_commands_are_left_to_the_ledger(ledger_repo: tuple[Repo, dict[str, str]]) -> None:
    repo, ids = ledger_repo
    for args in (["task", "show", ids["runs"]], ["ledger", "show", ids["runs"], "--json"]):
        assert quick(repo, *args).returncode == 99, args
    shown = through_ledger(repo, "task", "show", ids["runs"])
    assert shown.returncode == 0 and "usage: none journaled" in shown.stdout, shown.stderr


def test_the_quick_path_imports_no_heavy_module(ledger_repo: tuple[Repo, dict[str, str]]) -> None:
    repo, _ids = ledger_repo
    for args in (["task", "list"], ["task", "list", "--json"]):
        done = quick(repo, *args, heavy=",".join(sorted(HEAVY)))
        assert done.returncode == 0, done.stderr
        assert done.stderr.rpartition("\nHEAVY ")[2].strip() == "", (args, done.stderr)
    # A list is the command typed all day: not even dataclasses (inspect, ast, the tokenizer).
    done = quick(repo, "task", "list", heavy="dataclasses,inspect")
    assert done.stderr.rpartition("\nHEAVY ")[2].strip() == "", done.stderr


def test_a_piped_table_has_every_whole_id_and_no_box_art(
    ledger_repo: tuple[Repo, dict[str, str]],
) -> None:
    repo, ids = ledger_repo
    for done in (through_ledger(repo, "task", "list"), quick(repo, "task", "list")):
        lines = done.stdout.splitlines()
        assert lines[0].split() == ["id", "status", "attempts", "title", "note"]
        first = {line.split()[0] for line in lines[1:]}
        assert first == {*ids.values(), "t-wait"}, done.stdout
        assert LONG_ID in done.stdout and "…" not in done.stdout.split("\n")[1][:120]
        assert not set("┏━┃│└┘┡╇") & set(done.stdout)
        assert len(lines[1]) > 120  # nothing was cut to fit 80 columns
    held = next(line for line in lines if line.startswith("t-held "))
    assert held.endswith('"waiting for the design\\treview"')  # one line per row, tab shown


def test_what_the_quick_path_is_not_sure_of_goes_to_the_ledger(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    assert quick(repo, "task", "list").returncode == 99  # no ledger file yet: the Ledger's
    listed = through_ledger(repo, "task", "list")  # an empty answer, and nothing created
    assert listed.returncode == 0 and not (repo.root / ".assay").exists()
    Ledger.open(f"sqlite:///{repo.root / '.assay' / 'assay.db'}").close()
    for args in (
        ["task", "list", "--help"],
        ["task", "list", "--status", "sideways"],
        ["task", "list", "--status=held"],
        ["task", "show", "-x"],
        ["task", "show", "a\udc80b"],
    ):
        assert quick(repo, *args).returncode == 99, args
    import sqlite3

    with sqlite3.connect(repo.root / ".assay" / "assay.db") as db:
        db.execute("UPDATE alembic_version SET version_num = '0099'")  # a newer assay's
    assert quick(repo, "task", "list").returncode == 99


def test_a_row_the_models_would_judge_is_the_ledgers_to_show(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    with Ledger.open(f"sqlite:///{repo.root / '.assay' / 'assay.db'}") as ledger:
        now = datetime(2026, 1, 1, tzinfo=UTC)
        for task_id in ("t-good", "t-zombie"):
            ledger.add_task(Task.new(id=task_id, title=task_id, instruction="x", now=now))
    import sqlite3

    with sqlite3.connect(repo.root / ".assay" / "assay.db") as db:
        db.execute("UPDATE tasks SET status = 'zombie' WHERE id = 't-zombie'")
    assert quick(repo, "task", "list").returncode == 99
    listed = through_ledger(repo, "task", "list")
    assert "unreadable" in listed.stdout and "t-good" in listed.stdout
