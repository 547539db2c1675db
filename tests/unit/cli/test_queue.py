"""The queue through the real command: task add/list/show/hold/release/cancel, serve, ledger
show, payload show, contract init/check."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import yaml
from support.repo import FIXED, make_repo, replay_contract

from assay.core.contract_yaml import placeholder_task

# A coder that needs nothing more than its flags (a replay coder needs its steps).
COMMAND_CODER = ("--coder", "command", "--coder-command", "true")


def test_add_serve_show_ledger_payload(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = replay_contract(repo, "wrong", "fixed", land="branch")
    ids = []
    for _ in range(3):
        added = repo.main("task", "add", "--contract", str(contract), "--json")
        assert added.returncode == 0, added.stderr
        ids.append(json.loads(added.stdout)["id"])
    listed = json.loads(repo.main("task", "list", "--json").stdout)
    assert [t["status"] for t in listed] == ["queued"] * 3

    held = repo.main("task", "hold", ids[2], "--reason", "not yet")
    assert held.returncode == 0, held.stderr

    served = repo.main("serve", "--concurrency", "2", "--once", "--poll", "0.2")
    assert served.returncode == 0, served.stderr
    listed = {t["id"]: t for t in json.loads(repo.main("task", "list", "--json").stdout)}
    assert [listed[i]["status"] for i in ids] == ["done", "done", "held"]
    assert listed[ids[2]]["hold_source"] == "manual"

    shown = json.loads(repo.main("task", "show", ids[0], "--json").stdout)
    assert len(shown["runs"]) == 1 and shown["runs"][0]["status"] == "ready"
    run_id = shown["runs"][0]["id"]

    payload = json.loads(repo.main("payload", "show", run_id).stdout)
    assert payload["run_id"] == run_id and payload["attempts"]["total"] == 2
    # Read on another machine, where the run's folder is not: the ledger keeps the payload.
    written = Path(shown["runs"][0]["payload_path"])
    assert json.loads(written.read_text()) == payload
    written.unlink()
    elsewhere = repo.main("payload", "show", run_id)
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert json.loads(elsewhere.stdout) == payload

    ledger = json.loads(repo.main("ledger", "show", ids[0], "--json").stdout)
    assert ledger["stage_state"]["task"]["attempts"] == 1
    assert ledger["stage_state"]["recover"]["attempts"] == 1
    assert ledger["stage_state"]["dispatch"]["attempts"] == 2
    assert ledger["laps"] == 2

    human = repo.main("task", "show", ids[2])
    assert "held by a human" in human.stdout and "release" in human.stdout
    released = repo.main("task", "release", ids[2])
    assert released.returncode == 0, released.stderr
    assert json.loads(repo.main("task", "show", ids[2], "--json").stdout)["status"] == "queued"
    cancelled = repo.main("task", "cancel", ids[2])
    assert cancelled.returncode == 0
    assert (
        "cancelled" in json.loads(repo.main("task", "show", ids[2], "--json").stdout)["hold_reason"]
    )


def test_bad_task_commands_exit_2_without_a_traceback(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    for args in (
        ("task", "show", "nope"),
        ("task", "release", "nope"),
        ("ledger", "show", "nope"),
        ("payload", "show", "nope"),
        ("task", "list", "--status", "sideways"),
        ("run", "--task", "nope"),
    ):
        done = repo.main(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr and done.stderr.startswith("assay: ")
    queued = json.loads(repo.main("task", "add", "x", *COMMAND_CODER, "--json").stdout)
    again = repo.main("task", "release", queued["id"])
    assert again.returncode == 2 and "held" in again.stderr


def test_contract_init_writes_a_template_that_checks_once_its_task_is_written(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    written = repo.main("contract", "init", "assay.yaml")
    assert written.returncode == 0, written.stderr
    text = (repo.root / "assay.yaml").read_text()
    assert "#" in text and "halt_classes" in text
    assert yaml.safe_load(text)["task"]
    untouched = repo.main("contract", "check", "assay.yaml")
    assert untouched.returncode == 2 and "placeholder" in untouched.stderr, untouched.stderr
    (repo.root / "assay.yaml").write_text(text.replace(placeholder_task(), "Fix slugify()."))
    assert repo.main("contract", "check").returncode == 0  # assay.yaml, as init wrote it
    refused = repo.main("contract", "init", "assay.yaml")
    assert refused.returncode == 2 and "--force" in refused.stderr
    (repo.root / "bad.yaml").write_text("task: x\nseats: many\n")
    bad = repo.main("contract", "check", "bad.yaml")
    assert bad.returncode == 2 and "line 2" in bad.stderr


def test_run_from_an_instruction_and_flags(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    done = repo.main(
        "run",
        "Make slugify keep digits.",
        "--coder",
        "command",
        "--coder-command",
        repo.put("fixed.py", "src/slug.py"),
        "--validator",
        "true",
        "--land",
        "merge",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["status"] == "merged"
    assert (repo.root / "src" / "slug.py").read_text() == FIXED


def test_a_corrupt_stored_contract_is_one_line_and_exit_4(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    queued = json.loads(repo.main("task", "add", "x", *COMMAND_CODER, "--json").stdout)
    with sqlite3.connect(repo.root / ".assay" / "assay.db") as db:  # as an older assay left it
        db.execute("UPDATE tasks SET contract = NULL WHERE id = ?", (queued["id"],))
    stored = repo.root / ".assay" / "tasks" / f"{queued['id']}.contract.json"
    stored.parent.mkdir()
    stored.write_text("{not json")
    done = repo.main("run", "--task", queued["id"])
    assert done.returncode == 4
    assert done.stderr.startswith(f"assay: task {queued['id']}: its stored contract ")
    assert "is unreadable" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
