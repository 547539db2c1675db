"""The Temporal executor through the real commands: assay worker, serve --temporal, task cancel.

The workers and the background submitter are processes; adding tasks, reading the ledger, a
submitter waited for and the commands that reach a running workflow run in this process.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.in_process import run_assay
from support.in_process import show_json as show
from support.repo import Repo, make_repo, replay_contract
from support.temporal import DevServer, ExternalServer
from support.workers import Workers, serve_args, submit
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from assay.adapters.store.sql import Ledger
from assay.adapters.temporal_connection import TemporalConnection
from assay.engine.temporal.client import connect
from assay.engine.temporal.config import DEFAULT_NAMESPACE, workflow_id
from assay.engine.temporal.worker import workflow_runner
from assay.engine.temporal.workflow import RunWorkflow


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make_repo(tmp_path)


@pytest.fixture
def workers(
    repo: Repo,
    tmp_path: Path,
    temporal_server: DevServer | ExternalServer,
    postgres_url: str,
) -> Iterator[Workers]:
    """Workers for ``repo`` on the session's server, on a queue of this test's own."""
    with Workers(temporal_server.address, repo.root, postgres_url, tmp_path / "machines") as w:
        yield w


def add_task(repo: Repo, contract: Path, env: dict[str, str]) -> str:
    task_id: str = show(repo.root, "task", "add", "--contract", str(contract), env=env)["id"]
    return task_id


def test_serve_submits_and_workers_run_each_task_to_done_on_one_worker(
    repo: Repo, workers: Workers
) -> None:
    env = workers.env
    contract = replay_contract(repo, "wrong", "fixed", land="branch")
    ids = [add_task(repo, contract, env) for _ in range(3)]
    for _ in range(2):  # two workers: a run's activities must all stay on the one that opened it
        workers.start(max_dispatches=1)
    args = serve_args(workers.address, workers.task_queue, poll=0.2)
    served = run_assay(args, cwd=repo.root, env=env)  # the submitter, in this process
    assert served.returncode == 0, served.stderr
    assert "submitted as workflow assay-" in served.stderr
    for task_id in ids:
        shown = show(repo.root, "task", "show", task_id, env=env)
        assert shown["status"] == "done", shown
        runs = shown["runs"]
        assert isinstance(runs, list) and len(runs) == 1 and runs[0]["status"] == "ready"
        payload = show(repo.root, "payload", "show", runs[0]["id"], env=env)
        assert payload["attempts"]["total"] == 2 and payload["status"] == "ready"
    asyncio.run(_replays(workers.address, ids))


async def _replays(temporal: str, task_ids: list[str]) -> None:
    """Each workflow's history replays on the workflow code as it is (deterministic), and
    every activity of its run ran on the one worker that opened it (affinity)."""
    client = await connect(TemporalConnection(temporal, DEFAULT_NAMESPACE))
    replayer = Replayer(
        workflows=[RunWorkflow],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(),
    )
    for task_id in task_ids:
        history = await client.get_workflow_handle(workflow_id(task_id)).fetch_history()
        started = [
            e.activity_task_started_event_attributes.identity
            for e in history.events
            if e.HasField("activity_task_started_event_attributes")
        ]
        assert len(started) >= 4 and len(set(started)) == 1, started
        replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert replayed.replay_failure is None, replayed.replay_failure


def test_temporal_needs_postgresql(repo: Repo, temporal_server: DevServer | ExternalServer) -> None:
    for args in (("worker",), ("serve", "--once")):
        done = repo.assay(*args, "--temporal", temporal_server.address)
        assert done.returncode == 2, done.stderr
        assert "PostgreSQL" in done.stderr and "ASSAY_DATABASE_URL" in done.stderr
        assert "Traceback" not in done.stderr


def test_cancel_and_hold_reach_the_running_workflows(repo: Repo, workers: Workers) -> None:
    # Both on one worker and one submitter: each task's coder sleeps its own time, so the
    # check that a coder is gone cannot see the other's (or another test's).
    env = workers.env
    cases = {
        "cancel": ((), "cancelled", "sleep 127"),
        "hold": (("--reason", "not now"), "not now", "sleep 131"),
        "stop": (("--cancel", "--reason", "wrong base"), "wrong base", "sleep 137"),
        "web": ((), "from the page", "sleep 139"),  # the dashboard's stop button
    }
    ids = {}
    for command, (_args, _reason, sleeper) in cases.items():
        contract = repo.contract(
            f"{command}.yaml",
            f"""task: Sleep for a long time.
scope: {{allow: ["src/**"]}}
coder: {{kind: command, command: "{sleeper}", timeout_seconds: 300}}
validators:
  - {{id: tests, kind: command, run: "true"}}
land: none
sandbox: none
""",
        )
        ids[command] = add_task(repo, contract, env)
    workers.start()
    serve = submit(repo.root, workers.address, workers.task_queue, env, poll=0.2)
    try:
        deadline = time.monotonic() + 60
        for task_id in ids.values():
            while show(repo.root, "task", "show", task_id, env=env)["status"] != "running":
                assert time.monotonic() < deadline, "the run never started"
                time.sleep(0.2)
        time.sleep(1.0)  # the coders are sleeping now
        for command, (args, _reason, _sleeper) in cases.items():
            if command == "web":
                _stop_from_the_dashboard(repo, workers, ids[command], "from the page")
                continue
            done = run_assay(
                ["task", command, ids[command], *args],
                cwd=repo.root,
                env={**env, "ASSAY_TEMPORAL": workers.address},
            )
            assert done.returncode == 0, done.stderr
            assert "held" in done.stdout, (done.stdout, done.stderr)
        _out, err = serve.communicate(timeout=60)
        assert serve.returncode == 0, err
        assert err.count("; the task is held for a human") == 4, err
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    for command, (_args, reason, sleeper) in cases.items():
        shown = show(repo.root, "task", "show", ids[command], env=env)
        assert shown["status"] == "held" and shown["hold_source"] == "manual", shown
        assert reason in str(shown["hold_reason"])
        runs = shown["runs"]
        assert isinstance(runs, list) and len(runs) == 1 and runs[0]["status"] == "failed"
        # The hold is recorded with who asked, as the request was.
        with Ledger(workers.database_url) as ledger:
            events = ledger.events(ids[command])
        asked = [e.data for e in events if e.kind == "task.stop_requested"]
        held = [e.data for e in events if e.kind == "task.saved"][-1]
        via = "web" if command == "web" else "cli"
        action = "hold" if command in ("hold", "web") else "cancel"
        assert [(a["action"], a["via"], a["on"]) for a in asked] == [(action, via, "temporal")]
        assert (held["action"], held["via"], held["by"]) == (action, via, asked[0]["by"])
        assert held["reason"] == shown["hold_reason"]
        # Nothing of the coder lives on: its process group was stopped.
        alive = subprocess.run(
            ["pgrep", "-f", sleeper], capture_output=True, text=True, check=False
        )
        assert alive.stdout.strip() == "", alive.stdout


def _stop_from_the_dashboard(repo: Repo, workers: Workers, task_id: str, reason: str) -> None:
    """Post the task page's stop form to a dashboard like ``serve --temporal``'s (the
    workflow is signalled, the hold follows its close)."""
    from fastapi.testclient import TestClient
    from support.dashboard import BASE, credentials, log_in

    from assay.cli.temporal_stop import web_stopper
    from assay.web.app import create_app
    from assay.web.config import WebConfig

    connection = TemporalConnection(workers.address, DEFAULT_NAMESPACE)
    with Ledger(workers.database_url) as ledger:
        config = WebConfig(
            ledger=ledger,
            credentials=credentials(repo.root.parent / "web-config"),
            temporal_stop=web_stopper(connection),
        )
        client = TestClient(create_app(config), base_url=BASE, follow_redirects=False)
        log_in(client)
        page = client.get(f"/tasks/{task_id}")
        assert f'action="/tasks/{task_id}/stop"' in page.text
        sent = client.post(
            f"/tasks/{task_id}/stop",
            data={"csrf": client.cookies["assay_csrf"], "reason": reason, "mode": "hold"},
            headers={"Origin": BASE},
        )
        assert sent.status_code == 303, sent.text
        assert sent.headers["location"] == f"/tasks/{task_id}?notice=stopping"
