"""The dashboard's read models of a run made by Temporal workers: read from another machine's
ledger, it looks like a local one (the workers are real processes)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from assay.adapters.store.sql import Ledger
from assay.core.vocab import EventKind
from assay.web import views
from assay.web.views import AttemptState


def test_a_temporal_run_reads_as_a_local_one_from_another_machine(
    tmp_path: Path, temporal_server: Any, postgres_url: str
) -> None:
    from support.repo import git, make_repo, replay_contract
    from support.workers import Workers, add_task, show, submit

    repo = make_repo(tmp_path)
    contract = replay_contract(repo, "wrong", "fixed", land="branch")
    # The first coder says something, then works a while: its log is read while it runs.
    text = contract.read_text()
    contract.write_text(text.replace('{script: "', f'{{script: "echo {CODING}; sleep 3; ', 1))
    with Workers(temporal_server.address, repo.root, postgres_url, tmp_path / "machines") as pool:
        task_id = add_task(repo.root, contract, pool.env)
        pool.start(max_dispatches=1)
        served = submit(repo.root, pool.address, pool.task_queue, pool.env, poll=0.2)
        try:
            live = _live_log(postgres_url, task_id)
        finally:
            _, err = served.communicate(timeout=120)
        assert served.returncode == 0, err
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
    # The worker shipped the running coder's output before its seat ended; its final log then
    # replaced that provisional copy.
    assert live.endswith(".log.out") and live not in {log.name for log in run.logs}


CODING = "coding-live-on-a-worker"


def _live_log(url: str, task_id: str) -> str:
    """The name of the log of the task's run that holds :data:`CODING`, once the ledger has
    it, while no seat of the run has finished."""
    with Ledger(url) as ledger:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            runs = [e.run_id for e in ledger.events(task_id) if e.run_id]
            for run_id in dict.fromkeys(runs):
                kinds = {e.kind for e in ledger.events(run_id=run_id)}
                assert EventKind.SEAT_FINISHED not in kinds, (
                    "the seat ended before its log was seen"
                )
                for entry in ledger.run_logs(run_id):
                    kept = ledger.run_log(run_id, entry.name)
                    if kept is not None and CODING in (kept.text or ""):
                        return entry.name
            time.sleep(0.2)
    raise AssertionError("the running coder's log never reached the ledger")
