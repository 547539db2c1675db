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
from assay.engine.local.runner import run_task


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


def test_a_seat_its_spent_task_budget_never_starts_spends_a_known_zero(tmp_path: Path) -> None:
    import sqlalchemy as sa

    from assay.adapters.store.schema import runs
    from assay.core.usage import BudgetLimits, UsageFigures
    from assay.engine.local.metering import RunMeter, coder_key

    repo = make_repo(tmp_path)
    text = replay_contract(repo, "fixed").read_text() + "budgets: {task_max_tokens: 1000}\n"
    contract = parse_contract(text)
    home = repo.root / ".assay"
    home.mkdir()
    ledger = Ledger.open(f"sqlite:///{home / 'assay.db'}")
    now = datetime.now(UTC)
    task = Task.new(id="t1", title="t", instruction=contract.task, now=now)
    ledger.add_task(task)
    with ledger._engine.begin() as conn:  # an earlier run of the task that spent it all
        conn.execute(sa.insert(runs).values(id="r0", task_id="t1", status="failed", started_at=now))
    earlier = RunMeter(ledger, task_id="t1", run_id="r0", limits=BudgetLimits(), clock=lambda: now)
    earlier.dispatch(coder_key("t1", "r0", 1, 1, "llm")).finish(
        UsageFigures(tokens_in=1200, cost_usd=0.05)
    )
    report = run_task(repo=repo.root, home=home, ledger=ledger, task=task, contract=contract)
    payload = report.payload
    assert (payload.status.value, payload.task_status.value) == ("blocked", "held")
    usage = payload.usage
    # Never started: a known zero, so the task's cost stays known.
    assert (usage.tokens, usage.cost_usd, usage.unreported_dispatches) == (0, 0.0, 0)
    with ledger:
        spent = ledger.usage(task_id="t1")
    assert sum(d.figures.tokens for d in spent) == 1200
    assert all(d.figures.priced for d in spent)
