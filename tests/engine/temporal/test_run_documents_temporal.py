"""A run on the Temporal executor closes through the same record as a local one, so it keeps
the same documents in the ledger: the payload, the chosen diff and the halt states."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.repo import Repo, git, make_repo, replay_contract
from support.temporal import DevServer, ExternalServer
from support.workers import Workers, add_task, serve_once, show

from assay.adapters.store.sql import Ledger

pytestmark = pytest.mark.slow


@pytest.fixture
def workers(
    tmp_path: Path, temporal_server: DevServer | ExternalServer, postgres_url: str
) -> Iterator[tuple[Repo, Workers]]:
    repo = make_repo(tmp_path)
    with Workers(temporal_server.address, repo.root, postgres_url, tmp_path / "machines") as w:
        yield repo, w


def test_a_temporal_run_keeps_its_documents(
    workers: tuple[Repo, Workers], postgres_url: str
) -> None:
    repo, pool = workers
    contract = replay_contract(repo, "wrong", "fixed", land="branch")
    task_id = add_task(repo.root, contract, pool.env)
    pool.start(max_dispatches=1)
    served = serve_once(repo.root, pool.address, pool.task_queue, pool.env, poll=0.2)
    assert served.returncode == 0, served.stderr
    (run,) = show(repo.root, "task", "show", task_id, env=pool.env)["runs"]
    with Ledger(postgres_url) as ledger:
        document = ledger.run_document(run["id"])
    assert document is not None
    assert document.payload["status"] == "ready" and document.payload["attempts"]["total"] == 2
    branch = document.payload["land"]["branch"]
    assert document.diff == git(repo.root, "diff", f"{branch}~1", branch, strip=False)
    assert document.halt_states is not None
    assert {h["lifecycle"] for h in document.halt_states["halts"]} == {"ATTESTED"}
