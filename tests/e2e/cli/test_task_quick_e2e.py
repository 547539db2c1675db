"""What only a process shows of ``assay task list``: the early reader
(:func:`assay.cli.task_list.main`, offered the command before typer) imports none of the heavy
libraries, and a piped table keeps whole ids. That both routes print the same, and what the
early reader leaves to the Ledger, is ``tests/unit/cli/test_task_list.py``'s."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from support.repo import ASSAY, Repo, make_repo

from assay.adapters.store.sql import Ledger
from assay.core.tasks import Task

HEAVY = ("sqlalchemy", "pydantic", "typer", "rich", "alembic", "yaml")
HEAVY_ENV = "QUICK_TEST_HEAVY"
# Run in a child: the early reader's answer (99: it left the command to typer), then which of
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


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    """A ledger with a long id, a unicode title and a hold reason with a tab."""
    made = make_repo(tmp_path_factory.mktemp("quick"))
    t0 = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    with Ledger.open(f"sqlite:///{made.root / '.assay' / 'assay.db'}") as ledger:
        ledger.add_task(Task.new(id=LONG_ID, title="réparer le 漢字 ✓", instruction="ü", now=t0))
        held = Task.new(id="t-held", title="held one", instruction="x", now=t0)
        held.hold("waiting for the  design\treview", t0 + timedelta(seconds=1))
        ledger.add_task(held)
    return made


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}


def quick(repo: Repo, *args: str, heavy: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", QUICK, *args],
        cwd=repo.root,
        capture_output=True,
        text=True,
        check=False,
        env={**_env(), HEAVY_ENV: heavy},
    )


def test_the_early_reader_imports_no_heavy_module(repo: Repo) -> None:
    for args in (["task", "list"], ["task", "list", "--json"]):
        done = quick(repo, *args, heavy=",".join(sorted(HEAVY)))
        assert done.returncode == 0, done.stderr
        assert done.stderr.rpartition("\nHEAVY ")[2].strip() == "", (args, done.stderr)
    # A list is the command typed all day: not even dataclasses (inspect, ast, the tokenizer).
    done = quick(repo, "task", "list", heavy="dataclasses,inspect")
    assert done.stderr.rpartition("\nHEAVY ")[2].strip() == "", done.stderr


def test_a_piped_table_has_every_whole_id_and_no_box_art(repo: Repo) -> None:
    done = subprocess.run(
        [str(ASSAY), "task", "list"],
        cwd=repo.root,
        capture_output=True,
        text=True,
        check=False,
        env=_env(),
    )
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["id", "status", "attempts", "title", "note"], done.stderr
    assert {line.split()[0] for line in lines[1:]} == {LONG_ID, "t-held"}, done.stdout
    assert LONG_ID in done.stdout and "…" not in done.stdout.split("\n")[1][:120]
    assert not set("┏━┃│└┘┡╇") & set(done.stdout)
    assert max(len(line) for line in lines[1:]) > 120  # nothing was cut to fit 80 columns
    held = next(line for line in lines if line.startswith("t-held "))
    assert held.endswith('"waiting for the design\\treview"')  # one line per row, tab shown
