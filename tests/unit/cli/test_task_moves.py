"""``assay task hold|release|cancel`` print what they always printed and record in the ledger
who moved the task and from where (``task.saved`` with action, by, via and reason)."""

from __future__ import annotations

import json
from pathlib import Path

from support.repo import make_repo, replay_contract

from assay.adapters.store.sql import Ledger
from assay.core.vocab import EventKind


def test_moves_print_as_before_and_record_who_and_where(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = replay_contract(repo, "fixed")
    added = repo.main("task", "add", "--contract", str(contract), "--json")
    task_id = json.loads(added.stdout)["id"]
    said = [
        repo.main("task", "hold", task_id, "--reason", "not yet"),
        repo.main("task", "release", task_id),
        repo.main("task", "cancel", task_id),
    ]
    again = f"`assay task release {task_id}` lets it run again"
    assert [(d.returncode, d.stdout) for d in said] == [
        (0, f"{task_id}: held (a manual hold: {again})\n"),
        (0, f"{task_id}: queued (attempts reset to 0; run history kept)\n"),
        (0, f"{task_id}: held (cancelled: {again})\n"),
    ]
    refused = repo.main("task", "hold", task_id)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert f"cannot hold task '{task_id}': it is held" in refused.stderr
    with Ledger(f"sqlite:///{repo.root / '.assay' / 'assay.db'}") as ledger:
        saved = [e.data for e in ledger.events(task_id) if e.kind == EventKind.TASK_SAVED]
    assert [(d["status"], d["action"], d["reason"]) for d in saved] == [
        ("held", "hold", "not yet"),
        ("queued", "release", None),
        ("held", "cancel", "cancelled by an operator"),
    ]
    assert {d["via"] for d in saved} == {"cli"}
    assert all(str(d["by"]).count("@") == 1 for d in saved)
