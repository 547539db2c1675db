"""A run that cannot be recorded (the ledger locked by another process) leaves no run folder,
and recovery removes folders such runs left behind before this was so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.repo import Repo, make_repo

COMMAND_CODER = ["--coder", "command", "--coder-command", "true", "--validator", "true"]
HOLD = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
"""


@contextmanager
def ledger_locked_by_another_process(repo: Repo) -> Iterator[None]:
    """An exclusive SQLite lock on the repository's ledger, held by a child process."""
    path = repo.root / ".assay" / "assay.db"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=10)


def run_folders(repo: Repo) -> list[str]:
    runs = repo.root / ".assay" / "runs"
    return sorted(p.name for p in runs.iterdir()) if runs.is_dir() else []


@pytest.fixture
def queued(tmp_path: Path) -> tuple[Repo, str]:
    repo = make_repo(tmp_path)
    added = repo.main("task", "add", "do it", *COMMAND_CODER, "--json")
    assert added.returncode == 0, added.stderr
    return repo, json.loads(added.stdout)["id"]


@pytest.mark.parametrize("args", [["run", "--task"], ["serve", "--once"]], ids=["run", "serve"])
def test_a_run_the_locked_ledger_refused_leaves_no_folder(
    queued: tuple[Repo, str], args: list[str]
) -> None:
    repo, task_id = queued
    argv = [*args, task_id] if args[0] == "run" else args
    with ledger_locked_by_another_process(repo):
        done = repo.main(*argv, ASSAY_DB_TIMEOUT="0.5")
    assert done.returncode == 4, done.stderr
    assert "is locked by another process" in done.stderr
    assert "Traceback" not in done.stderr
    assert run_folders(repo) == []
    # The task never started: it runs as soon as the lock is gone.
    again = repo.main("run", "--task", task_id)
    assert again.returncode in (0, 1), again.stderr  # its coder changes nothing: failed
    (folder,) = run_folders(repo)
    assert (repo.root / ".assay" / "runs" / folder / "payload.json").is_file()


def test_recovery_removes_a_dead_run_folder_with_no_ledger_row(
    queued: tuple[Repo, str],
) -> None:
    repo, _ = queued
    runs = repo.root / ".assay" / "runs"
    orphan, busy, kept = runs / "r20260101-000000-aaaaaa", runs / "r-live", runs / "r-files"
    for folder in (orphan, busy, kept):
        folder.mkdir(parents=True)
        (folder / "lock").write_text("1")
    (kept / "payload.json").write_text("{}")  # more than a lock: not ours to judge, kept
    old = time.time() - 600
    for folder in (orphan, busy, kept):
        os.utime(folder / "lock", (old, old))
    holder = subprocess.Popen(  # a run still starting holds its lock: never swept
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()",
            str(busy / "lock"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        resumed = repo.main("run", "--resume")
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=10)
    assert not orphan.exists()
    assert busy.is_dir() and kept.is_dir()
    assert resumed.returncode == 0, resumed.stderr
