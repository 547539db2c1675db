"""Bad input through `assay` (in-process): one clear line, a documented exit code, nothing
half-made."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.repo import Repo, git, make_repo

from assay.adapters.store.sql import Ledger

COMMAND_CODER = ["--coder", "command", "--coder-command", "true", "--validator", "true"]


def created(repo: Repo) -> list[str]:
    """What assay left in the repository's .assay folder: task contracts and task rows."""
    home = repo.root / ".assay"
    found = [p.name for p in (home / "tasks").glob("*")] if (home / "tasks").exists() else []
    if (home / "assay.db").exists():
        with sqlite3.connect(home / "assay.db") as db:
            found += [row[0] for row in db.execute("SELECT id FROM tasks")]
    return found


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "sqlalche" not in stderr.lower()
    return lines[0]


@pytest.mark.parametrize(
    ("task", "why"),
    [
        ('"\\ud800"', "U+D800, a lone surrogate"),
        ('"fix \\0 it"', "NUL character"),
    ],
    ids=["surrogate", "nul"],
)
def test_contract_check_and_run_agree_on_text_that_cannot_be_stored(
    tmp_path: Path, task: str, why: str
) -> None:
    repo = make_repo(tmp_path)
    contract = repo.contract(
        "bad.yaml", f"task: {task}\ncoder: {{kind: command, command: 'true'}}\n"
    )
    checked = repo.main("contract", "check", str(contract))
    ran = repo.main("run", "--contract", str(contract))
    assert checked.returncode == ran.returncode == 2, (checked.stderr, ran.stderr)
    for done in (checked, ran):
        line = one_line(done.stderr)
        assert "line 1: task:" in line and why in line
    assert created(repo) == []


def test_an_instruction_that_cannot_be_stored_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    # A byte that is not UTF-8 reaches main as Python decodes a process's arguments: escaped.
    ran = repo.main("run", os.fsdecode(b"fix \xff it"), *COMMAND_CODER)
    assert ran.returncode == 2
    assert "U+DCFF" in one_line(ran.stderr)
    assert created(repo) == []


def test_a_repository_with_no_commits_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "a.py").write_text("x = 1\n")
    empty = Repo(root=root, fixes=tmp_path)
    for args in (["run", "do it", *COMMAND_CODER], ["task", "add", "do it", *COMMAND_CODER]):
        done = empty.main(*args)
        assert done.returncode == 2, done.stderr
        assert "has no commits yet" in one_line(done.stderr)
    assert not (root / ".assay").exists()


@contextmanager
def locked_ledger(repo: Repo) -> Iterator[Path]:
    """The repository's ledger file, held under an exclusive lock by this process."""
    path = repo.root / ".assay" / "assay.db"
    Ledger.open(f"sqlite:///{path}").close()  # (a command that only reads creates none)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        yield path
    finally:
        holder.close()


@pytest.mark.parametrize(
    "args",
    [["run", "do it", *COMMAND_CODER], ["task", "add", "do it", *COMMAND_CODER]],
    ids=["run", "task-add"],
)
def test_a_locked_ledger_waits_then_names_the_file(tmp_path: Path, args: list[str]) -> None:
    repo = make_repo(tmp_path)
    with locked_ledger(repo) as path:
        done = repo.main(*args, ASSAY_DB_TIMEOUT="0.5")
        assert done.returncode == 4, done.stderr
        line = one_line(done.stderr)
        assert f"the ledger database {path} is locked by another process" in line
        assert "waited 0.5 s" in line
    assert created(repo) == []


def test_ledger_show_displays_a_stage_it_does_not_know(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    added = repo.main("task", "add", "do it", *COMMAND_CODER, "--json")
    task_id = json.loads(added.stdout)["id"]
    with sqlite3.connect(repo.root / ".assay" / "assay.db") as db:
        db.execute(
            "INSERT INTO stage_records VALUES (?, 'verify', 2, 'deferred', '[]')", (task_id,)
        )
    shown = repo.main("ledger", "show", task_id)
    assert shown.returncode == 0, shown.stderr
    assert "verify" in shown.stdout and "2 attempt(s)" in shown.stdout
    assert "deferred" in shown.stdout and "not known to this version" in shown.stdout
    as_json = repo.main("ledger", "show", task_id, "--json")
    assert as_json.returncode == 0, as_json.stderr
    document = json.loads(as_json.stdout)
    assert document["foreign_stages"]["verify"]["attempts"] == 2
    assert "verify" not in document["stage_state"]
