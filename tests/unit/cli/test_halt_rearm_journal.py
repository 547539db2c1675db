"""``assay halt rearm`` journals ``halt.rearmed`` in the ledger of the assay home its state
folder belongs to (who, from where, the evidence), and a ledger it cannot write never changes
the command's exit code or output."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from assay.adapters.store import halt_ops
from assay.adapters.store.sql import Ledger
from assay.core.halts import CANONICAL_HALTS
from assay.core.tasks import Task
from assay.core.vocab import EventKind

if TYPE_CHECKING:
    from support.cli_fixtures import Assay

CANONICAL = [(n.value, s.value) for n, s in CANONICAL_HALTS.items()]
BLOCK = "halt-scope-breach"
T0 = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)


def _home_with_fired_halt(home: Path, write_contract: Callable[..., Path]) -> Path:
    """An assay home whose ledger has run r1 (dispatch d1) with its block halt fired."""
    home.mkdir()
    with Ledger.open(f"sqlite:///{home / 'assay.db'}") as ledger:
        task = Task.new(id="t1", title="fix it", instruction="fix it", now=T0)
        ledger.add_task(task)
        task.start(T0, run_id="r1")
        ledger.start_run(task, "r1", dispatch_id="d1")
    state_dir = home / "halt-state"
    contract = write_contract(home / "contract.yaml", CANONICAL, task="fix it")
    assert halt_ops.arm(contract, "d1", state_dir)[1] == 0
    assert halt_ops.check("d1", BLOCK, state_dir, fire=True, evidence="touched .github")[1] == 1
    return state_dir


def _rearm(assay: Assay, state_dir: Path) -> tuple[int, dict[str, object]]:
    ran = assay(
        "halt", "rearm", "--dispatch-id", "d1", "--state-dir", str(state_dir),
        "--condition", BLOCK, "--evidence", "reverted the workflow edit",
    )  # fmt: skip
    return ran.code, ran.doc


def test_rearm_is_journaled_with_who_and_evidence(
    assay_main: Assay, tmp_path: Path, write_contract: Callable[..., Path]
) -> None:
    state_dir = _home_with_fired_halt(tmp_path / "home", write_contract)
    code, doc = _rearm(assay_main, state_dir)
    assert code == 0 and doc["rearmed"] is True
    with Ledger(f"sqlite:///{tmp_path / 'home' / 'assay.db'}") as ledger:
        rearmed = [e for e in ledger.events("t1") if e.kind == EventKind.HALT_REARMED]
    assert len(rearmed) == 1
    event = rearmed[0]
    assert event.run_id == "r1"
    assert {k: event.data[k] for k in ("dispatch_id", "condition", "evidence", "via")} == {
        "dispatch_id": "d1",
        "condition": BLOCK,
        "evidence": "reverted the workflow edit",
        "via": "cli",
    }
    assert "@" in str(event.data["by"])


def test_a_ledger_it_cannot_write_changes_nothing_of_the_command(
    assay_main: Assay, tmp_path: Path, write_contract: Callable[..., Path]
) -> None:
    state_dir = _home_with_fired_halt(tmp_path / "home", write_contract)
    (tmp_path / "home" / "assay.db").write_bytes(b"this is not a database")
    code, doc = _rearm(assay_main, state_dir)
    assert code == 0 and doc["rearmed"] is True
    assert halt_ops.check("d1", BLOCK, state_dir)[0]["current_state"]["lifecycle"] == "CHECKED"
