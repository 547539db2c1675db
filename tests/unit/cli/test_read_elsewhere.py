"""The ledger is the only place a result lives: a held task read on another machine (where
the run's folder and halt state file are not) still shows what fired, and a run whose kept
document row is corrupt still has its payload shown from the file when that is here."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from support.repo import make_repo, scope_breach_run


def test_a_task_held_elsewhere_shows_what_fired_from_the_ledger(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    task_id, run_id = scope_breach_run(repo)
    home = repo.root / ".assay"
    # Another machine: neither the run's folder nor the halt state files are here.
    shutil.rmtree(home / "runs" / run_id)
    shutil.rmtree(home / "halt-state")

    shown = repo.main("task", "show", task_id, "--json")
    assert shown.returncode == 0, shown.stderr
    [halt] = json.loads(shown.stdout)["fired_halts"]
    assert halt["name"] == "halt-scope-breach" and halt["run_id"] == run_id
    assert halt["lifecycle"] is None  # its state file is on the machine that ran it
    text = repo.main("task", "show", task_id).stdout
    assert "halt-scope-breach fired (block, now unknown)" in text

    payload = repo.main("payload", "show", run_id)
    assert payload.returncode == 0, payload.stderr
    assert json.loads(payload.stdout)["halts"]["fired"][0]["name"] == "halt-scope-breach"


def test_a_corrupt_kept_document_falls_back_to_the_payload_file(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    task_id, run_id = scope_breach_run(repo)
    written = json.loads((repo.root / ".assay" / "runs" / run_id / "payload.json").read_text())
    with sqlite3.connect(repo.root / ".assay" / "assay.db") as db:
        changed = db.execute(
            "UPDATE run_documents SET payload = '[1, 2]' WHERE run_id = ?", (run_id,)
        ).rowcount
    assert changed == 1

    payload = repo.main("payload", "show", run_id)
    assert payload.returncode == 0, payload.stderr
    assert json.loads(payload.stdout) == written
    shown = repo.main("task", "show", task_id, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["fired_halts"][0]["name"] == "halt-scope-breach"
