"""A ledger row edited by hand hurts only its own task: the others are listed, shown and served."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from support.repo import Repo, make_repo

COMMAND_CODER = ["--coder", "command", "--coder-command", "true", "--validator", "true"]


def add(repo: Repo, instruction: str) -> str:
    done = repo.main("task", "add", instruction, *COMMAND_CODER, "--max-attempts", "1", "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


def corrupt(repo: Repo, sql: str, *params: str) -> None:
    with sqlite3.connect(repo.root / ".assay" / "assay.db") as db:
        assert db.execute(sql, params).rowcount > 0


def test_a_task_row_with_an_unknown_status_is_listed_as_unreadable_and_skipped(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    zombie, good = add(repo, "first"), add(repo, "second")
    corrupt(repo, "UPDATE tasks SET status = 'zombie' WHERE id = ?", zombie)

    listed = repo.main("task", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["id"]: row for row in json.loads(listed.stdout)}
    assert rows[good]["status"] == "queued"
    assert rows[zombie]["status"] == "unreadable" and "'zombie'" in rows[zombie]["problem"]
    table = repo.main("task", "list")
    assert table.returncode == 0 and "unreadable" in table.stdout, table.stderr

    for args in (["task", "show", zombie], ["run", "--task", zombie]):
        shown = repo.main(*args)
        assert shown.returncode == 4, shown.stderr
        (line,) = shown.stderr.strip().splitlines()
        assert f"task '{zombie}' is unreadable in the ledger: status 'zombie'" in line
        assert "Traceback" not in shown.stderr and "pydantic" not in shown.stderr
    assert repo.main("task", "show", good).returncode == 0
    assert repo.main("ledger", "show", zombie).returncode == 0

    served = repo.main("serve", "--once")
    assert served.returncode == 0, served.stderr
    assert served.stderr.count(f"skipping task {zombie}: unreadable") == 1, served.stderr
    assert f"{good}: blocked" in served.stderr  # the good task still ran


def test_a_stage_row_that_is_not_json_is_shown_not_fatal(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    task_id = add(repo, "first")
    corrupt(
        repo,
        "UPDATE stage_records SET last_finding_signatures = 'not json' WHERE task_id = ?",
        task_id,
    )
    for args in (["task", "list"], ["task", "show", task_id], ["ledger", "show", task_id]):
        done = repo.main(*args)
        assert done.returncode == 0, (args, done.stderr)
    shown = repo.main("ledger", "show", task_id)
    assert "unreadable: 'not json'" in shown.stdout, shown.stdout
    as_json = json.loads(repo.main("ledger", "show", task_id, "--json").stdout)
    assert "task" in as_json["foreign_stages"]
    served = repo.main("serve", "--once")
    assert served.returncode == 0 and f"{task_id}: blocked" in served.stderr, served.stderr
