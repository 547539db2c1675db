"""A queued task warns only about coder settings the user wrote, never about the defaults of a
stored contract (an older assay stored the whole defaulted model). In-process (Repo.main); the
resumed and the Temporal cases are e2e."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

from support.repo import Repo, make_repo, replay_contract

from assay.core.contract import parse_contract

IGNORES = re.compile(r"coder ignores `([a-z_]+)`")


def _queue(repo: Repo, contract: Path) -> str:
    added = repo.main("task", "add", "--contract", str(contract), "--json")
    assert added.returncode == 0, added.stderr
    return str(json.loads(added.stdout)["id"])


def _store_as_an_older_assay_did(repo: Repo, task_id: str, contract: Path) -> None:
    """The task's stored contract becomes the full defaulted dump, as queued before."""
    full = parse_contract(contract.read_text()).model_dump(mode="json")
    assert {"model", "prompt_via", "args"} <= set(full["coder"])  # defaults in the document
    with sqlite3.connect(repo.root / ".assay" / "assay.db") as conn:
        conn.execute("UPDATE tasks SET contract = ? WHERE id = ?", (json.dumps(full), task_id))


def test_a_task_queued_by_an_older_assay_runs_without_ignored_setting_warnings(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    contract = replay_contract(repo, "fixed", land="branch")
    task_id = _queue(repo, contract)
    _store_as_an_older_assay_did(repo, task_id, contract)
    served = repo.main("serve", "--once", "--no-web", "--poll", "0.2")
    assert served.returncode == 0, served.stderr
    assert f"task {task_id}: ready: the change is left on branch" in served.stderr
    assert "; the task is done (attempts: 1 of 3 used)" in served.stderr
    assert IGNORES.findall(served.stderr) == [], served.stderr
