"""A queued task's contract lives in the ledger: a worker with another checkout and another
home runs it; a task an older assay queued (its contract a file) still runs."""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.repo import Repo, git, make_repo, replay_contract

POSTGRES_ENV = "ASSAY_TEST_POSTGRES_URL"


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The one ledger two machines share: a SQLite file, or a PostgreSQL database of this
    test's own (created here, dropped after; never another's)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared' / 'assay.db'}"
        return
    server = os.environ.get(POSTGRES_ENV)
    if not server:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    name = f"assay_contracts_{secrets.token_hex(4)}"
    admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield sa.make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _queue(repo: Repo, **env: str) -> str:
    contract = replay_contract(repo, "fixed", land="branch")
    added = repo.main("task", "add", "--contract", str(contract), "--json", **env)
    assert added.returncode == 0, added.stderr
    return str(json.loads(added.stdout)["id"])


def test_a_worker_elsewhere_runs_a_task_from_the_ledger_alone(
    tmp_path: Path, shared_url: str
) -> None:
    repo = make_repo(tmp_path)
    url = shared_url
    task_id = _queue(repo, ASSAY_DATABASE_URL=url)
    assert not (repo.root / ".assay" / "tasks").exists()  # no file beside the ledger

    # Another machine: its own clone and its own home, only the ledger in common.
    clone = Repo(root=tmp_path / "elsewhere", fixes=repo.fixes)
    git(tmp_path, "clone", "-q", str(repo.root), str(clone.root))
    done = clone.main("run", "--task", task_id, "--json", ASSAY_DATABASE_URL=url)
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert (payload["task_id"], payload["status"]) == (task_id, "ready")
    assert (clone.root / ".assay" / "runs" / payload["run_id"] / "payload.json").exists()
    assert not (repo.root / ".assay" / "runs").exists()


def test_a_task_an_older_assay_queued_still_runs_from_its_file(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    task_id = _queue(repo)
    db = repo.root / ".assay" / "assay.db"
    with sqlite3.connect(db) as conn:  # what an older assay left: no contract in the row...
        (document,) = conn.execute("SELECT contract FROM tasks WHERE id = ?", (task_id,)).fetchone()
        conn.execute("UPDATE tasks SET contract = NULL WHERE id = ?", (task_id,))
    stored = repo.root / ".assay" / "tasks" / f"{task_id}.contract.json"
    stored.parent.mkdir()
    stored.write_text(document)  # ...and the contract in its file
    served = repo.main("serve", "--once", "--poll", "0.2")
    assert served.returncode == 0, served.stderr
    assert f"task {task_id}: ready: the change is left on branch" in served.stderr
    assert "; the task is done (attempts: 1 of 3 used)" in served.stderr
    with sqlite3.connect(db) as conn:  # adopted: the ledger holds it now, the file is left
        (kept,) = conn.execute("SELECT contract FROM tasks WHERE id = ?", (task_id,)).fetchone()
    assert json.loads(kept) == json.loads(document)
    assert stored.read_text() == document


def test_a_contract_corrupted_in_the_ledger_is_one_line_and_exit_4(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    task_id = _queue(repo)
    with sqlite3.connect(repo.root / ".assay" / "assay.db") as conn:
        conn.execute("UPDATE tasks SET contract = '{\"task\": 7}' WHERE id = ?", (task_id,))
    done = repo.main("run", "--task", task_id)
    assert done.returncode == 4
    assert done.stderr.startswith(f"assay: task {task_id}: its stored contract in the ledger ")
    assert "is unreadable: task:" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    listed = json.loads(repo.main("task", "list", "--json").stdout)
    assert [t["status"] for t in listed] == ["queued"]  # untouched


def test_a_task_with_no_contract_anywhere_is_one_line_and_exit_4(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    task_id = _queue(repo)
    with sqlite3.connect(repo.root / ".assay" / "assay.db") as conn:
        conn.execute("UPDATE tasks SET contract = NULL WHERE id = ?", (task_id,))
    done = repo.main("run", "--task", task_id)
    assert done.returncode == 4
    assert done.stderr.strip() == (
        f"assay: task {task_id} has no stored contract (none in the ledger, nor at "
        f"{repo.root / '.assay' / 'tasks' / f'{task_id}.contract.json'})"
    )
