"""Every close keeps the run's documents in the ledger (payload, chosen diff, halt states), and
the run's events carry what a reader needs (a seat's cost, a validator's output tail): checked
on real runs of the replay coder in a real repository."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from support.repo import CHECK_TESTS, Repo, git, make_repo, replay_contract

from assay.adapters.store.records import DIFF_LIMIT
from assay.adapters.store.sql import Ledger
from assay.core.contract import parse_contract
from assay.core.tasks import Task
from assay.core.vocab import EventKind
from assay.engine.local.runner import RunReport, run_task


def _run(repo: Repo, contract_file: Path) -> tuple[Ledger, RunReport]:
    contract = parse_contract(contract_file.read_text())
    home = repo.root / ".assay"
    home.mkdir(exist_ok=True)
    ledger = Ledger.open(f"sqlite:///{home / 'assay.db'}")
    task = Task.new(id="t1", title="t", instruction=contract.task, now=datetime.now(UTC))
    ledger.add_task(task)
    report = run_task(repo=repo.root, home=home, ledger=ledger, task=task, contract=contract)
    return ledger, report


def test_a_blocked_then_passed_run_keeps_its_documents_and_says_why(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    ledger, report = _run(repo, replay_contract(repo, "wrong", "fixed"))
    with ledger:
        document = ledger.run_document(report.run_id)
        events = ledger.events(run_id=report.run_id)
    assert document is not None and report.payload_path is not None
    assert document.payload == json.loads(report.payload_path.read_text())
    assert document.payload["status"] == "merged"
    # the diff kept is the change merged into main (same blobs, same patch)
    assert document.diff == git(repo.root, "diff", "HEAD~1", "HEAD", strip=False)
    assert document.diff_truncated is False
    assert document.halt_states is not None
    assert document.halt_states["dispatch_id"] == report.run_id
    assert {h["lifecycle"] for h in document.halt_states["halts"]} == {"ATTESTED"}

    seats = [e.data for e in events if e.kind == EventKind.SEAT_FINISHED]
    assert [s["attempt"] for s in seats] == [1, 2]
    for seat in seats:
        assert {"tokens_used", "cost_usd", "wall_time_ms"} <= seat.keys()
        assert isinstance(seat["wall_time_ms"], int) and seat["wall_time_ms"] >= 0
    tests = [
        e.data
        for e in events
        if e.kind == EventKind.VALIDATOR_FINISHED and e.data["validator"] == "tests"
    ]
    assert [t["severity"] for t in tests] == ["block", "pass"]
    blocked = tests[0]
    assert "test_digits" in str(blocked["justification"]) + json.dumps(blocked["findings"])
    assert len(str(blocked["justification"])) <= 2000
    assert isinstance(blocked["findings"], list) and len(blocked["findings"]) <= 20


def test_an_oversized_diff_is_cut_and_flagged(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    big = "python3 -c \\\"open('src/big.txt','w').write(('x' * 99 + '\\\\n') * 7000)\\\""
    contract = repo.contract(
        "big.yaml",
        f"""task: Make slugify keep digits.
scope: {{allow: ["src/**"]}}
coder:
  kind: replay
  steps:
    - {{script: "{repo.put("fixed.py", "src/slug.py")} && {big}"}}
validators:
  - {{id: tests, kind: command, run: "{CHECK_TESTS}"}}
land: merge
""",
    )
    ledger, report = _run(repo, contract)
    with ledger:
        document = ledger.run_document(report.run_id)
    assert document is not None and document.payload["status"] == "merged"
    assert document.diff_truncated is True and document.diff is not None
    assert len(document.diff) <= DIFF_LIMIT and document.diff.endswith("\n")
    assert document.diff.startswith("diff --git ")
