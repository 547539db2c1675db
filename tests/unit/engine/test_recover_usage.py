"""A run whose host died: what its seats' programs reported after that (in the files they
left) is journaled at recovery, once, and a seat that reported nothing is unknown."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from assay.adapters.coders import usage_of_logs
from assay.adapters.store.records import DispatchRecord
from assay.adapters.store.schema import runs
from assay.adapters.store.sql import Ledger
from assay.core.contract import parse_contract
from assay.core.tasks import Task
from assay.core.usage import BudgetLimits, Spend, UsageFigures
from assay.engine.local.metering import RunMeter, coder_key, judge_key, validator_key
from assay.engine.recovery.usage import account_left_logs, account_unanswered_judges

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
SAMPLES = Path(__file__).parents[2] / "support" / "usage_samples"


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger(f"sqlite:///{tmp_path / 'assay.db'}")
    ledger.migrate()
    ledger.add_task(Task.new(id="t1", title="t", instruction="Fix it.", now=NOW))
    with ledger._engine.begin() as conn:
        conn.execute(sa.insert(runs).values(id="r1", task_id="t1", status="prep", started_at=NOW))
    return ledger


def _record(seat: int, coder: str) -> DispatchRecord:
    return DispatchRecord(dispatch_id=f"r1.a1.s{seat}", attempt=1, seat=seat, coder=coder)


def test_what_a_program_printed_after_its_host_died_is_journaled_once(
    ledger: Ledger, tmp_path: Path
) -> None:
    home = tmp_path / ".assay"
    log_dir = home / "runs" / "r1" / "attempt-1" / "seat-1"
    log_dir.mkdir(parents=True)
    whole = (SAMPLES / "claude-2.1.332-success.jsonl").read_text()
    (log_dir / "claude.log.out").write_text(whole)
    final = usage_of_logs("claude", log_dir)
    assert final is not None and final.tokens > 0
    # Live, the dispatch had journaled part of it before assay was killed.
    meter = RunMeter(ledger, task_id="t1", run_id="r1", limits=BudgetLimits(), clock=lambda: NOW)
    meter.dispatch(coder_key("t1", "r1", 1, 1, "claude")).report(
        UsageFigures(tokens_in=final.tokens_in // 2, model=final.model)
    )
    records = [_record(1, "claude"), _record(2, "command")]
    for _ in range(2):  # a second recovery adds nothing
        account_left_logs(
            ledger, home=home, task_id="t1", run_id="r1", dispatches=records, clock=lambda: NOW
        )
    spent = {d.key.dispatch: d.figures for d in ledger.usage(run_id="r1")}
    assert spent["a1.s1"].tokens == final.tokens
    assert spent["a1.s1"].cost_usd == final.cost_usd
    assert not spent["a1.s2"].reported  # the command coder reported nothing: unknown
    total = Spend.of(spent.values())
    assert (total.unreported, total.cost_usd) == (1, None)


@pytest.mark.parametrize(("last", "unknown"), [("call", True), ("reply", False)])
def test_an_llm_call_the_host_died_waiting_for_makes_the_cost_unknown(
    ledger: Ledger, tmp_path: Path, last: str, unknown: bool
) -> None:
    """The ``llm`` coder runs in assay: a call in flight when assay died was never journaled,
    though the provider may have answered it; its dispatch's cost is then unknown (a floor)."""
    home = tmp_path / ".assay"
    log_dir = home / "runs" / "r1" / "attempt-1" / "seat-1"
    log_dir.mkdir(parents=True)
    events = ["start", "call", "reply", "tool", "call", "reply", "tool", last]
    (log_dir / "llm-transcript.jsonl").write_text("".join(f'{{"event": "{e}"}}\n' for e in events))
    meter = RunMeter(ledger, task_id="t1", run_id="r1", limits=BudgetLimits(), clock=lambda: NOW)
    meter.dispatch(coder_key("t1", "r1", 1, 1, "llm")).report(
        UsageFigures(tokens_in=2000, tokens_out=200, cost_usd=0.02, calls=2)
    )
    for _ in range(2):  # a second recovery adds nothing
        account_left_logs(
            ledger,
            home=home,
            task_id="t1",
            run_id="r1",
            dispatches=[_record(1, "llm")],
            clock=lambda: NOW,
        )
    [spent] = ledger.usage(run_id="r1")
    assert spent.figures.tokens == 2200 and spent.figures.known_cost == 0.02
    assert spent.figures.priced is not unknown


def test_a_judge_waiting_for_its_model_when_the_host_died_is_unknown(
    ledger: Ledger, tmp_path: Path
) -> None:
    """A blind judge that had journaled nothing: unknown; a judge validator that had: its cost
    unknown, its known part a floor; a judge that was answered: as journaled."""
    contract = parse_contract(
        "task: t\njudges: 2\njudge: {kind: llm, model: m}\nvalidators:\n"
        "  - {id: 'look over', kind: judge, model: m, criteria: [ok]}\n"
    )
    home = tmp_path / ".assay"
    run_dir = home / "runs" / "r1" / "attempt-1"
    waiting, answered = '{"event": "request"}\n{"event": "call"}\n', '{"event": "reply"}\n'
    for judge, text in ((1, waiting), (2, answered)):
        folder = run_dir / "judges" / f"judge-{judge}" / "round-0"
        folder.mkdir(parents=True)
        (folder / "judge.jsonl").write_text(text)
    (run_dir / "seat-1" / "validators").mkdir(parents=True)
    (run_dir / "seat-1" / "validators" / "judge-look_over.jsonl").write_text(waiting)
    meter = RunMeter(ledger, task_id="t1", run_id="r1", limits=BudgetLimits(), clock=lambda: NOW)
    meter.dispatch(validator_key("t1", "r1", 1, 1, "look over")).report(
        UsageFigures(tokens_in=500, cost_usd=0.005, calls=1)
    )
    meter.dispatch(judge_key("t1", "r1", 1, 2, 0, "llm m")).report(
        UsageFigures(tokens_in=900, cost_usd=0.009, calls=1)
    )
    for _ in range(2):  # a second recovery adds nothing
        account_unanswered_judges(
            ledger, home=home, contract=contract, task_id="t1", run_id="r1", clock=lambda: NOW
        )
    spent = {d.key.dispatch: d.figures for d in ledger.usage(run_id="r1")}
    assert not spent["a1.j1.r0"].reported
    assert not spent["a1.s1.look over"].priced
    assert spent["a1.s1.look over"].known_cost == 0.005
    assert spent["a1.j2.r0"].cost_usd == 0.009
    assert len(ledger.usage(run_id="r1")) == 3
