"""The Temporal executor through the real commands: assay worker, serve --temporal, task cancel."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.repo import ASSAY, Repo, make_repo, replay_contract


def _env(pg_url: str, **extra: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    environ["ASSAY_DATABASE_URL"] = pg_url
    environ.update(extra)
    return environ


class Workers:
    """``assay worker`` processes started by a test, each stopped (by its pid) at the end."""

    def __init__(self, repo: Repo, pg_url: str, temporal: str) -> None:
        self.repo, self.pg_url, self.temporal = repo, pg_url, temporal
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, *flags: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
        proc = subprocess.Popen(
            [str(ASSAY), "worker", "--temporal", self.temporal, "--json", *flags],
            cwd=self.repo.root,
            env=_env(self.pg_url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the ready line: it polls now
        assert line, proc.stderr.read() if proc.stderr else "no output"
        ready: dict[str, str] = json.loads(line)
        assert ready["event"] == "ready"
        return proc, ready

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@pytest.fixture
def workers(tmp_path: Path, pg_url: str, temporal_server: str) -> Iterator[Workers]:
    repo = make_repo(tmp_path)
    started = Workers(repo, pg_url, temporal_server)
    yield started
    started.stop()


def _add(repo: Repo, pg_url: str, contract: Path) -> str:
    added = repo.assay("task", "add", "--contract", str(contract), "--json", **_env(pg_url))
    assert added.returncode == 0, added.stderr
    task_id: str = json.loads(added.stdout)["id"]
    return task_id


def _task(repo: Repo, pg_url: str, task_id: str) -> dict[str, object]:
    shown = repo.assay("task", "show", task_id, "--json", **_env(pg_url))
    assert shown.returncode == 0, shown.stderr
    found: dict[str, object] = json.loads(shown.stdout)
    return found


def test_serve_submits_and_a_worker_runs_it_to_done(workers: Workers) -> None:
    repo, pg = workers.repo, workers.pg_url
    contract = replay_contract(repo, "wrong", "fixed", land="branch")
    ids = [_add(repo, pg, contract) for _ in range(2)]
    workers.start("--max-dispatches", "2")
    served = repo.assay(
        "serve", "--temporal", workers.temporal, "--once", "--poll", "0.2", **_env(pg)
    )
    assert served.returncode == 0, served.stderr
    assert "submitted as workflow assay-" in served.stderr
    for task_id in ids:
        shown = _task(repo, pg, task_id)
        assert shown["status"] == "done", shown
        runs = shown["runs"]
        assert isinstance(runs, list) and len(runs) == 1 and runs[0]["status"] == "ready"
        payload = json.loads(repo.assay("payload", "show", runs[0]["id"], **_env(pg)).stdout)
        assert payload["attempts"]["total"] == 2 and payload["status"] == "ready"


def test_temporal_needs_postgresql(tmp_path: Path, temporal_server: str) -> None:
    repo = make_repo(tmp_path)
    for args in (("worker",), ("serve", "--once")):
        done = repo.assay(*args, "--temporal", temporal_server)
        assert done.returncode == 2, done.stderr
        assert "PostgreSQL" in done.stderr and "ASSAY_DATABASE_URL" in done.stderr
        assert "Traceback" not in done.stderr


def test_cancel_reaches_the_running_workflow(workers: Workers) -> None:
    repo, pg = workers.repo, workers.pg_url
    contract = repo.contract(
        "sleep.yaml",
        """task: Sleep for a long time.
scope: {allow: ["src/**"]}
coder: {kind: command, command: "sleep 127", timeout_seconds: 300}
validators:
  - {id: tests, kind: command, run: "true"}
land: none
sandbox: none
""",
    )
    task_id = _add(repo, pg, contract)
    workers.start()
    serve = subprocess.Popen(
        [str(ASSAY), "serve", "--temporal", workers.temporal, "--once", "--poll", "0.2"],
        cwd=repo.root,
        env=_env(pg),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while _task(repo, pg, task_id)["status"] != "running":
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.2)
        time.sleep(1.0)  # the coder is sleeping now
        cancelled = repo.assay(
            "task", "cancel", task_id, **_env(pg, ASSAY_TEMPORAL=workers.temporal)
        )
        assert cancelled.returncode == 0, cancelled.stderr
        assert "held" in cancelled.stdout, cancelled.stdout
        _out, err = serve.communicate(timeout=60)
        assert serve.returncode == 0, err
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    shown = _task(repo, pg, task_id)
    assert shown["status"] == "held" and shown["hold_source"] == "manual", shown
    assert "cancelled" in str(shown["hold_reason"])
    runs = shown["runs"]
    assert isinstance(runs, list) and len(runs) == 1 and runs[0]["status"] == "failed"
    # Nothing of the coder lives on: its process group was stopped.
    alive = subprocess.run(["pgrep", "-f", "sleep 127"], capture_output=True, text=True)
    assert alive.stdout.strip() == "", alive.stdout
