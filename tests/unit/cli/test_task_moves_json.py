"""``assay task hold|release|cancel --json``: what was done, by whom, from where, why, and the
task exactly as ``assay task show ID --json`` prints it after the move."""

from __future__ import annotations

import json
from pathlib import Path

from support.repo import make_repo, replay_contract


def test_each_move_prints_the_move_and_the_task_as_task_show_does(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = replay_contract(repo, "fixed")
    added = repo.main("task", "add", "--contract", str(contract), "--json")
    task_id = json.loads(added.stdout)["id"]
    moves = [
        (["hold", task_id, "--reason", "  not yet ✓ ", "--json"], "hold", "not yet ✓", "held"),
        (["release", task_id, "--json"], "release", None, "queued"),
        (["cancel", task_id, "--json"], "cancel", "cancelled by an operator", "held"),
    ]
    for args, action, reason, status in moves:
        done = repo.main("task", *args)
        assert done.returncode == 0, done.stderr
        document = json.loads(done.stdout)
        assert list(document) == ["action", "by", "via", "reason", "task"]
        assert (document["action"], document["via"], document["reason"]) == (action, "cli", reason)
        assert "@" in document["by"]  # user@host, as the ledger's task.saved event records it
        shown = json.loads(repo.main("task", "show", task_id, "--json").stdout)
        assert document["task"] == shown and shown["status"] == status
    refused = repo.main("task", "cancel", task_id, "--json")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr.startswith(f"assay: cannot cancel task '{task_id}': it is held,")
