"""A run killed just after its land moved the branch (``ASSAY_CRASH_AT`` ends the process, so
only a real one can take it) is closed by ``--resume`` with its documents kept in the ledger:
the payload and the merged diff."""

from __future__ import annotations

import json
from pathlib import Path

from support.repo import git, make_repo, replay_contract

from assay.adapters.store.sql import Ledger


def test_a_recovered_landed_run_keeps_its_payload_and_merged_diff(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = replay_contract(repo, "fixed")
    killed = repo.assay("run", "--contract", str(contract), ASSAY_CRASH_AT="ref_moved")
    assert killed.returncode == 137, killed.stderr
    resumed = repo.main("run", "--resume")  # the crash needs a process; the recovery not
    assert resumed.returncode == 0, resumed.stderr
    with Ledger(f"sqlite:///{repo.root / '.assay' / 'assay.db'}") as ledger:
        (run,) = [r for t in ledger.list_tasks() for r in ledger.runs(t.id)]
        document = ledger.run_document(run.id)
    assert document is not None and run.payload_path is not None
    assert document.payload == json.loads(Path(run.payload_path).read_text())
    assert document.diff == git(repo.root, "diff", "HEAD~1", "HEAD", strip=False)
    assert document.halt_states is not None
