"""A machine lost mid-run, on Temporal: kill -9 (or SIGTERM) the worker holding a dispatch,
kill -9 the server.

Two workers in separate processes (each its own home, as on two machines) share one dev server
and one PostgreSQL ledger. The coder sleeps, so its dispatch is in flight when the worker that
holds it is killed (its whole process group, coders included) or stopped (SIGTERM: it stops its
coders itself). The workflow notices within the heartbeat timeout, records the lost run once as
an environment error (refunded) and runs the task again on the other worker: the task is done,
landed once, the ledger's counts exact, and the lost run's payload says what happened. Then the
dev server itself is killed mid-run and started again on the same state 13 s later (longer than
the heartbeat timeout): serve --temporal says the outage and its end and waits it out, and the
task completes, landed once.
"""

from __future__ import annotations

import re
import signal
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.in_process import show_json as show
from support.repo import CHECK_TESTS, FIXED, Repo, git, make_repo
from support.services import require_temporal_executor
from support.temporal import DevServer, ExternalServer
from support.workers import Worker, service_env, submit

from assay.adapters.store.sql import Ledger
from assay.core.vocab import EventKind
from assay.engine.temporal.config import Timeouts

CODER_SLEEP = 6  # seconds: long enough to be killed mid-dispatch, short enough to finish after
SETTLE_TIMEOUT = 180.0
STAMPED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")
NOTICE_MARGIN = 5.0  # seconds beyond the heartbeat timeout for the lost run to be closed
OUTAGE = 13.0  # seconds the dev server is down
SEALING_KEY = "0123456789abcdef" * 4


def sleepy_contract(repo: Repo) -> Path:
    coder = f"sleep {CODER_SLEEP}; {repo.put('fixed.py', 'src/slug.py')}"
    return repo.contract(
        "sleepy.yaml",
        f"""task: Make slugify keep digits.
scope: {{allow: ["src/**"]}}
coder: {{kind: command, command: "{coder}"}}
validators: [{{id: tests, kind: command, run: "{CHECK_TESTS}"}}]
budgets: {{max_attempts: 2, max_refunds: 3}}
land: merge
""",
    )


def holder(workers: list[Worker], database_url: str, task_id: str, timeout: float = 60) -> Worker:
    """Once the ledger has the task's ``dispatch.started`` (written by the worker as its
    dispatch activity begins, before the coder runs), the worker whose home holds the seat."""
    ledger = Ledger.open(database_url)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            kinds = [e.kind for e in ledger.events_after(0, 1000, task_id=task_id)]
            if EventKind.DISPATCH_STARTED in kinds:
                for worker in workers:
                    if any(p.is_dir() for p in (worker.home / "seats").glob("*/*")):
                        return worker
            time.sleep(0.1)
    finally:
        ledger.close()
    tails = "\n".join(w.tail() for w in workers)
    raise AssertionError(f"no worker started the dispatch:\n{tails}")


def add_task(repo: Path, contract: Path, env: dict[str, str]) -> str:
    """``assay task add`` in this process (the workers and the submitter are the processes)."""
    task_id: str = show(repo, "task", "add", "--contract", str(contract), env=env)["id"]
    return task_id


def wait_settled(repo: Repo, task_id: str, env: dict[str, str]) -> dict[str, Any]:
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        task: dict[str, Any] = show(repo.root, "task", "show", task_id, env=env)
        open_runs = [r for r in task["runs"] if r["finished_at"] is None]
        if task["status"] in ("done", "held") and not open_runs:
            return task
        assert time.monotonic() < deadline, task
        time.sleep(0.5)


def landings(repo: Repo) -> list[str]:
    log = git(repo.root, "log", "--format=%(trailers:key=Assay-Run,valueonly)", "main")
    return [line for line in log.splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("stop", "said"),
    [(signal.SIGKILL, ("worker", "was lost")), (signal.SIGTERM, ("interrupted by SIGTERM",))],
    ids=["kill-9", "sigterm"],
)
def test_a_worker_killed_mid_dispatch_the_run_completes_on_the_other(
    tmp_path: Path,
    temporal_server: DevServer | ExternalServer,
    postgres_url: str,
    stop: signal.Signals,
    said: tuple[str, ...],
) -> None:
    require_temporal_executor()
    repo = make_repo(tmp_path)
    sealed = {"ASSAY_TEMPORAL_CODEC_KEY": SEALING_KEY}  # its history sealed, as in production
    env = service_env(postgres_url, **sealed)
    queue = f"faults-{uuid.uuid4().hex[:10]}"
    address = temporal_server.address
    workers = [
        Worker(
            address,
            repo.root,
            tmp_path / f"machine-{n}",
            postgres_url,
            queue,
            env=sealed,
            args=["--drain-timeout", "0"],  # SIGTERM hands over at once (drained: below)
        )
        for n in (1, 2)
    ]
    try:
        for worker in workers:
            worker.start()
        task_id = add_task(repo.root, sleepy_contract(repo), env)
        serve = submit(repo.root, address, queue, env)
        lost = holder(workers, postgres_url, task_id)
        time.sleep(0.5)  # the coder is asleep inside its dispatch
        killed_at = datetime.now(UTC)
        if stop is signal.SIGKILL:
            lost.kill()  # the machine is gone, its coders with it
        else:
            lost.terminate()  # stopped: it stops its coders and lets go of the run
        survivor = next(w for w in workers if w is not lost)
        _, err = serve.communicate(timeout=SETTLE_TIMEOUT)
        assert serve.returncode == 0, f"{err}\nsurvivor:\n{survivor.tail()}"
        task = wait_settled(repo, task_id, env)
    finally:
        for worker in workers:
            worker.stop()

    # Done, landed once, by the second run.
    assert task["status"] == "done", task
    assert (repo.root / "src" / "slug.py").read_text() == FIXED
    first, second = task["runs"]  # exactly two runs: the lost one, recorded once, and the next
    assert landings(repo) == [second["id"]]
    assert second["status"] == "merged" and second["attempt_spent"]

    # The lost run: an environment error, refunded, its payload saying what happened.
    assert first["status"] == "failed" and not first["attempt_spent"], first
    payload = show(repo.root, "payload", "show", first["id"], env=env)
    assert payload["halt_type"] == "environment_error", payload
    assert payload["attempt_spent"] is False, payload
    assert all(words in payload["reason"] for words in said), payload["reason"]
    assert payload["attempts"]["coder_dispatches"] == 1
    # Noticed within the heartbeat timeout (plus a margin for a loaded machine), not after a
    # retry onto the dead worker's own queue.
    noticed = datetime.fromisoformat(first["finished_at"]) - killed_at
    assert noticed.total_seconds() <= Timeouts().heartbeat + NOTICE_MARGIN, noticed

    # The ledger's counts are exact: one spent attempt, two dispatches, one landing.
    assert task["attempts"] == 1
    ledger = show(repo.root, "ledger", "show", task_id, env=env)
    counts = {stage: state["attempts"] for stage, state in ledger["stage_state"].items()}
    assert counts["task"] == 1 and counts["dispatch"] == 2 and counts["land"] == 1, counts
    # One dispatch each, each run closed once, and the lost one closed as interrupted, once.
    runs = [first["id"], second["id"]]
    store = Ledger.open(postgres_url)
    try:
        assert {run: len(store.dispatches(run)) for run in runs} == dict.fromkeys(runs, 1)
        events = store.events(task_id)
    finally:
        store.close()
    closes = [e.run_id for e in events if e.kind == EventKind.RUN_CLOSED]
    assert closes == runs, closes  # the lost run closed before the next one opened
    interrupted = [e.run_id for e in events if e.kind == EventKind.RUN_INTERRUPTED]
    assert interrupted == [first["id"]], interrupted

    # The survivor left nothing behind for its run.
    assert not any((survivor.home / "seats").glob(f"{second['id']}/*"))
    if stop is signal.SIGTERM:  # what the stopped worker said, each line with its time
        said_lines = lost.stderr_path.read_text().splitlines()
        assert said_lines and all(STAMPED.match(line) for line in said_lines), said_lines


def test_a_worker_sigtermed_mid_dispatch_drains_the_run_completes_where_it_ran(
    tmp_path: Path, temporal_server: DevServer | ExternalServer, postgres_url: str
) -> None:
    require_temporal_executor()
    repo = make_repo(tmp_path)
    env = service_env(postgres_url)
    queue = f"faults-{uuid.uuid4().hex[:10]}"
    workers = [
        Worker(temporal_server.address, repo.root, tmp_path / f"m-{n}", postgres_url, queue)
        for n in (1, 2)
    ]
    try:
        for worker in workers:
            worker.start()
        task_id = add_task(repo.root, sleepy_contract(repo), env)
        serve = submit(repo.root, temporal_server.address, queue, env)
        draining = holder(workers, postgres_url, task_id)
        time.sleep(0.5)  # the coder is asleep inside its dispatch
        draining.terminate()  # SIGTERM: the default drain (60 s) outlasts the coder
        assert draining.proc is not None
        assert draining.proc.wait(timeout=SETTLE_TIMEOUT) == 143
        _, err = serve.communicate(timeout=SETTLE_TIMEOUT)
        assert serve.returncode == 0, err
        task = wait_settled(repo, task_id, env)
    finally:
        for worker in workers:
            worker.stop()
    [run] = task["runs"]  # one run, ended where it started: nothing redone
    assert task["status"] == "done" and run["status"] == "merged", task
    assert landings(repo) == [run["id"]]
    assert "SIGTERM: draining" in draining.tail()


def test_the_dev_server_killed_mid_run_and_restarted_the_run_completes(
    tmp_path: Path, postgres_url: str
) -> None:
    require_temporal_executor()
    repo = make_repo(tmp_path)
    env = service_env(postgres_url)
    queue = f"faults-{uuid.uuid4().hex[:10]}"
    server = DevServer(tmp_path / "server").start()
    worker = Worker(server.address, repo.root, tmp_path / "machine-1", postgres_url, queue)
    try:
        worker.start()
        task_id = add_task(repo.root, sleepy_contract(repo), env)
        serve = submit(repo.root, server.address, queue, env)
        holder([worker], postgres_url, task_id)
        time.sleep(1.0)
        server.kill()  # kill -9 of the server process, mid-dispatch; its state file stays
        time.sleep(OUTAGE)  # longer than serve's client and a heartbeat timeout wait
        server.start()  # the same state and port
        _, err = serve.communicate(timeout=SETTLE_TIMEOUT)
        assert serve.returncode == 0, f"{err}\nworker:\n{worker.tail()}"
        assert "Temporal does not answer" in err and "Temporal answers again" in err, err
        task = wait_settled(repo, task_id, env)
    finally:
        worker.stop()
        server.stop()

    assert task["status"] == "done", task
    assert (repo.root / "src" / "slug.py").read_text() == FIXED
    assert landings(repo) == [task["runs"][-1]["id"]]  # landed once
    # The outage lost no work: the run in flight went on where it was, its dispatch once.
    assert len(task["runs"]) == 1, ([r.get("reason") for r in task["runs"]], worker.tail(200))
    # However many runs the outage cost, only the last spent an attempt, and the ledger
    # counts each dispatch that ran.
    assert task["attempts"] == 1
    assert all(not r["attempt_spent"] for r in task["runs"][:-1])
    ledger = show(repo.root, "ledger", "show", task_id, env=env)
    assert ledger["stage_state"]["dispatch"]["attempts"] == len(task["runs"])
