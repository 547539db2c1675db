"""A dispatch that fails inside assay itself still leaves its usage in the journal: what it
reported, or, when it reported nothing, an unknown entry that no sum reads as $0."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.repo import make_repo, replay_contract

from assay.adapters.coders.base import DispatchRequest, DispatchResult
from assay.adapters.coders.replay import ReplayCoder
from assay.adapters.store.sql import Ledger
from assay.core.contract import parse_contract
from assay.core.tasks import Task
from assay.engine.runner import run_task


def test_a_dispatch_that_raises_is_journaled_as_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: ReplayCoder, request: DispatchRequest) -> DispatchResult:
        raise RuntimeError("an adapter's bug")

    monkeypatch.setattr(ReplayCoder, "dispatch", broken)
    repo = make_repo(tmp_path)
    contract = parse_contract(replay_contract(repo, "fixed").read_text())
    home = repo.root / ".assay"
    home.mkdir()
    ledger = Ledger.open(f"sqlite:///{home / 'assay.db'}")
    task = Task.new(id="t1", title="t", instruction=contract.task, now=datetime.now(UTC))
    ledger.add_task(task)
    report = run_task(repo=repo.root, home=home, ledger=ledger, task=task, contract=contract)
    with ledger:
        [spent] = ledger.usage(run_id=report.run_id)
    assert spent.figures.reported is False and spent.figures.cost_usd is None
    usage = report.payload.usage
    assert (usage.cost_usd, usage.unreported_dispatches, usage.dispatches) == (None, 1, 1)
