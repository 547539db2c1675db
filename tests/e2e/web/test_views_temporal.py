"""The dashboard's read models of a run made by Temporal workers: read from another machine's
ledger, it looks like a local one (the workers are real processes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assay.adapters.store.sql import Ledger
from assay.web import views
from assay.web.views import AttemptState


def test_a_temporal_run_reads_as_a_local_one_from_another_machine(
    tmp_path: Path, temporal_server: Any, postgres_url: str
) -> None:
    from support.repo import git, make_repo, replay_contract
    from support.workers import Workers, add_task, serve_once, show

    repo = make_repo(tmp_path)
    contract = replay_contract(repo, "wrong", "fixed", land="branch")
    with Workers(temporal_server.address, repo.root, postgres_url, tmp_path / "machines") as pool:
        task_id = add_task(repo.root, contract, pool.env)
        pool.start(max_dispatches=1)
        served = serve_once(repo.root, pool.address, pool.task_queue, pool.env, poll=0.2)
        assert served.returncode == 0, served.stderr
        (shown,) = show(repo.root, "task", "show", task_id, env=pool.env)["runs"]
    with Ledger(postgres_url) as ledger:  # no state dir: the workers' files are not here
        run = views.run_view(ledger, shown["id"], state_dir=None)
        page = views.queue_page(ledger)
        document = ledger.run_document(shown["id"])
    # Temporal's record is the local close: the same documents are kept in the ledger.
    assert document is not None and document.payload["attempts"]["total"] == 2
    branch = document.payload["land"]["branch"]
    assert document.diff == git(repo.root, "diff", f"{branch}~1", branch, strip=False)
    assert document.halt_states is not None
    assert run is not None and run.run.status == "ready"
    assert [a.state for a in run.attempts] == [AttemptState.BLOCKED, AttemptState.PASS]
    assert run.changed_files == ["src/slug.py"] and run.diff and "isalnum" in run.diff
    assert run.land is not None and run.land["branch"]
    assert run.halts and {h.lifecycle for h in run.halts} == {"ATTESTED"}
    assert not any(h.rearmable_here for h in run.halts)
    assert [r.task_id for r in page.rows] == [task_id] and page.rows[0].status == "done"
