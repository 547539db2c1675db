"""The Temporal executor through the real commands: assay worker, serve --temporal, task cancel."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.repo import Repo, make_repo, replay_contract
from support.temporal import DevServer, ExternalServer
from support.workers import Workers, add_task, assay, serve_once, show, submit
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

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


def test_serve_submits_and_workers_run_each_task_to_done_on_one_worker(
    repo: Repo, workers: Workers
) -> None:
    env = workers.env
    contract = replay_contract(repo, "wrong", "fixed", land="branch")
    ids = [add_task(repo.root, contract, env) for _ in range(3)]
    for _ in range(2):  # two workers: a run's activities must all stay on the one that opened it
        workers.start(max_dispatches=1)
    served = serve_once(repo.root, workers.address, workers.task_queue, env, poll=0.2)
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


@pytest.mark.parametrize(
    ("command", "reason"),
    [(("cancel",), "cancelled"), (("hold", "--reason", "not now"), "not now")],
    ids=["cancel", "hold"],
)
def test_cancel_and_hold_reach_the_running_workflow(
    repo: Repo, workers: Workers, command: tuple[str, ...], reason: str
) -> None:
    env = workers.env
    # Each case sleeps its own time, so the check that its coder is gone cannot see the
    # other case's coder when both run at once on two test workers.
    sleeper = "sleep 127" if command[0] == "cancel" else "sleep 131"
    contract = repo.contract(
        "sleep.yaml",
        f"""task: Sleep for a long time.
scope: {{allow: ["src/**"]}}
coder: {{kind: command, command: "{sleeper}", timeout_seconds: 300}}
validators:
  - {{id: tests, kind: command, run: "true"}}
land: none
sandbox: none
""",
    )
    task_id = add_task(repo.root, contract, env)
    workers.start()
    serve = submit(repo.root, workers.address, workers.task_queue, env, poll=0.2)
    try:
        deadline = time.monotonic() + 60
        while show(repo.root, "task", "show", task_id, env=env)["status"] != "running":
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.2)
        time.sleep(1.0)  # the coder is sleeping now
        cancelled = assay(
            repo.root,
            "task",
            command[0],
            task_id,
            *command[1:],
            env={**env, "ASSAY_TEMPORAL": workers.address},
        )
        assert cancelled.returncode == 0, cancelled.stderr
        assert "held" in cancelled.stdout, (cancelled.stdout, cancelled.stderr)
        _out, err = serve.communicate(timeout=60)
        assert serve.returncode == 0, err
        assert "; the task is held for a human" in err, err
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    shown = show(repo.root, "task", "show", task_id, env=env)
    assert shown["status"] == "held" and shown["hold_source"] == "manual", shown
    assert reason in str(shown["hold_reason"])
    runs = shown["runs"]
    assert isinstance(runs, list) and len(runs) == 1 and runs[0]["status"] == "failed"
    # Nothing of the coder lives on: its process group was stopped.
    alive = subprocess.run(["pgrep", "-f", sleeper], capture_output=True, text=True, check=False)
    assert alive.stdout.strip() == "", alive.stdout
