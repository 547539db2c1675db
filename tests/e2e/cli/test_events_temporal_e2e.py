"""``assay serve --temporal … --events jsonl --json``: the workers run the tasks, so serve
follows the shared ledger: every event a worker writes reaches its stdout, and the summary,
the last line, says what each workflow left its task as."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.repo import Repo, make_repo, replay_contract
from support.temporal import DevServer, ExternalServer
from support.workers import Workers, add_task, assay, serve_args

from assay.core.vocab import EventKind


@pytest.fixture
def workers(
    tmp_path: Path, temporal_server: DevServer | ExternalServer, postgres_url: str
) -> Iterator[tuple[Repo, Workers]]:
    repo = make_repo(tmp_path)
    with Workers(temporal_server.address, repo.root, postgres_url, tmp_path / "machines") as w:
        yield repo, w


def test_serve_temporal_streams_the_workers_events_and_ends_with_its_summary(
    workers: tuple[Repo, Workers],
) -> None:
    repo, w = workers
    task_id = add_task(repo.root, replay_contract(repo, "fixed", land="branch"), w.env)
    w.start()
    args = serve_args(w.address, w.task_queue, poll=0.2)
    done = assay(repo.root, *args, "--events", "jsonl", "--json", env=w.env, timeout=180)
    assert done.returncode == 0, done.stderr
    *events, summary = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["kind"] for e in events]
    assert set(kinds) <= {k.value for k in EventKind}, kinds
    for kind in ("run.opened", "dispatch.started", "seat.finished", "run.closed"):
        assert kind in kinds, kinds  # written by the worker, read back by serve
    assert {e["task_id"] for e in events} == {task_id}
    assert [e["id"] for e in events] == sorted({e["id"] for e in events})
    assert summary["closed"] == {task_id: "done"} and summary["runs"] == 1, summary
    assert summary["stopped_by"] is None
