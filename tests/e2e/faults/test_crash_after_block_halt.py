"""A run that died after its coder fired a block halt is held for a human when it is recovered,
never refunded and run again: the halt is sticky, whether the file or the ledger shows it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from support.crash import NOTES, crash_contract, landings
from support.repo import make_repo

from assay.engine.crashpoints import CRASH_EXIT

ASSAY = Path(sys.executable).with_name("assay")


def test_a_block_halt_fired_before_a_crash_holds_the_task(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    base = landings(repo.root)
    fire = (
        f"{ASSAY} halt check --dispatch-id $ASSAY_DISPATCH_ID "
        "--condition halt-irreversible-action --fire --evidence 'needs a force-push'"
        f" && echo more >> {NOTES}"
    )
    contract = crash_contract(repo, 1, coder=fire)
    killed = repo.assay("run", "--contract", str(contract), ASSAY_CRASH_AT="dispatch_ended")
    assert killed.returncode == CRASH_EXIT, killed.stderr

    resumed = repo.main("run", "--resume")
    assert resumed.returncode == 3, resumed.stderr  # held: a human decides, nothing re-ran
    assert landings(repo.root) == base
    tasks = json.loads(repo.main("task", "list", "--json").stdout)
    assert [t["status"] for t in tasks] == ["held"]
    runs = json.loads(repo.main("task", "show", tasks[0]["id"], "--json").stdout)["runs"]
    assert [r["status"] for r in runs] == ["blocked"]
    payload = json.loads(Path(runs[0]["payload_path"]).read_text())
    assert payload["halt_type"] == "escalate" and payload["attempt_spent"] is True
    assert [h["name"] for h in payload["halts"]["fired"]] == ["halt-irreversible-action"]
    assert "needs a force-push" in payload["reason"]
