"""Resumed tasks (after a crash point, which only a process takes) and tasks run through Temporal
warn only about coder settings the user wrote, never about the defaults of a stored contract
(an older assay stored the whole defaulted model). A queued one: tests/unit/cli."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import sqlalchemy as sa
from support.repo import Repo, make_repo, replay_contract
from support.temporal import DevServer, ExternalServer
from support.workers import Workers, add_task, serve_once, show

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


def test_a_resumed_task_warns_only_about_the_setting_the_user_wrote(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = replay_contract(repo, "fixed", land="branch")
    written = contract.read_text().replace("  kind: replay\n", "  kind: replay\n  model: m1\n")
    contract.write_text(written)
    task_id = _queue(repo, contract)
    _store_as_an_older_assay_did(repo, task_id, contract)
    crashed = repo.assay("run", "--task", task_id, ASSAY_CRASH_AT="task_started")
    assert crashed.returncode == 137, crashed.stderr
    resumed = repo.main("run", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert f"task {task_id}" in resumed.stderr
    assert IGNORES.findall(resumed.stderr) == ["model"], resumed.stderr  # written, so named


def test_a_task_run_through_temporal_warns_about_no_setting_the_user_never_gave(
    tmp_path: Path, temporal_server: DevServer | ExternalServer, postgres_url: str
) -> None:
    """The run's plan crosses Temporal's data converter, which writes every field of the
    contract; the worker must still see only what the user wrote."""
    repo = make_repo(tmp_path)
    contract = replay_contract(repo, "fixed", land="branch")
    with Workers(temporal_server.address, repo.root, postgres_url, tmp_path / "machines") as w:
        task_id = add_task(repo.root, contract, w.env)
        worker = w.start()
        served = serve_once(repo.root, w.address, w.task_queue, w.env, poll=0.2)
        assert served.returncode == 0, served.stderr
        shown = show(repo.root, "task", "show", task_id, env=w.env)
        assert shown["status"] == "done", shown
        worker_said = worker.tail(400)
    engine = sa.create_engine(postgres_url)
    try:
        with engine.connect() as conn:
            kinds = conn.execute(sa.text("SELECT kind, data FROM events")).all()
    finally:
        engine.dispose()
    assert "dispatch.started" in {kind for kind, _ in kinds}  # the run's events are here
    warned = [json.dumps(data) for kind, data in kinds if kind == "run.warning"]
    assert IGNORES.findall(" ".join(warned) + worker_said) == [], (warned, worker_said)
