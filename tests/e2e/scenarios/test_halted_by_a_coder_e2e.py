"""The settle row of a run halted by its coder: the coder fires the halt with ``assay halt
check``, a process of assay's, so it runs in the end-to-end tier (the other rows:
tests/unit/scenarios/test_settle_rows.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from support.repo import CHECK_TESTS, FIXED, make_repo

from tests.unit.scenarios.test_settle_rows import row_of, run, task_and_ledger


def test_halted_by_a_coder_fired_block_halt(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    fire = (
        f"{Path(sys.executable).parent / 'assay'} halt check --dispatch-id $ASSAY_DISPATCH_ID "
        "--condition halt-irreversible-action --fire --evidence 'needs a force-push'; "
        f"{repo.put('fixed.py', 'src/slug.py')}"
    )
    contract = repo.contract(
        "halt.yaml",
        f"""task: x
coder: {{kind: command, command: "{fire}"}}
validators: [{{id: tests, kind: command, run: "{CHECK_TESTS}"}}]
land: merge
""",
    )
    payload = run(repo, contract, 3)
    task, _ = task_and_ledger(repo, payload["task_id"])
    assert row_of(task) == "halted" and task["status"] == "held"
    assert payload["halt_type"] == "escalate"
    assert payload["halts"]["fired"][0]["detail"] == "needs a force-push"
    assert (repo.root / "src" / "slug.py").read_text() != FIXED  # nothing landed
