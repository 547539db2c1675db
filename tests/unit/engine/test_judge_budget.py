"""Judges spend the run's budget too: once their answers pass it, the run stops where it is,
blocked, with halt-budget-exhausted fired and the task held, as when a coder passes it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from support.model_server import ModelServer, Turn, Usage
from support.repo import Repo, make_repo, replay_contract

from assay.adapters.store.sql import Ledger
from assay.core.contract import parse_contract
from assay.core.tasks import Task, TaskStatus
from assay.core.vocab import RunStatus
from assay.engine.local.runner import RunReport, run_task

BIG = Usage(9000, 1000)
BUDGET = "budgets: {max_tokens: 1000}\n"


def _run(repo: Repo, contract_file: Path) -> tuple[Ledger, RunReport]:
    contract = parse_contract(contract_file.read_text())
    home = repo.root / ".assay"
    home.mkdir(exist_ok=True)
    ledger = Ledger.open(f"sqlite:///{home / 'assay.db'}")
    task = Task.new(id="t1", title="t", instruction=contract.task, now=datetime.now(UTC))
    ledger.add_task(task)
    return ledger, run_task(repo=repo.root, home=home, ledger=ledger, task=task, contract=contract)


def _held(ledger: Ledger, report: RunReport) -> None:
    payload = report.payload
    assert payload.status is RunStatus.BLOCKED and payload.usage.tokens == 10_000
    assert "halt-budget-exhausted" in [h.name for h in payload.halts.warnings]
    assert ledger.get_task("t1").status is TaskStatus.HELD


def test_blind_judges_that_spend_the_run_budget_hold_the_task(
    tmp_path: Path, model_server: ModelServer
) -> None:
    model_server.script(Turn.call("rank", {"ranking": ["A", "B"], "reasons": "same"}, usage=BIG))
    repo = make_repo(tmp_path)
    judge = f"{{kind: llm, model: m, base_url: {model_server.base_url!r}}}"
    judged = f"seats: 2\njudges: 1\njudge: {judge}\nenv: {{OPENAI_API_KEY: local-test-key}}\n"
    ledger, report = _run(repo, replay_contract(repo, "fixed", extra=judged + BUDGET))
    _held(ledger, report)
    assert report.payload.reason.startswith("budget exhausted: the run spent 10,000 tokens")


def test_a_judge_validator_that_spends_the_run_budget_holds_the_task(
    tmp_path: Path, model_server: ModelServer
) -> None:
    verdict = {"severity": "pass", "justification": "fine", "findings": []}
    model_server.script(Turn.call("verdict", verdict, usage=BIG))
    repo = make_repo(tmp_path)
    contract = replay_contract(repo, "fixed", extra=BUDGET).read_text()
    review = (
        f"  - {{id: review, kind: judge, model: m, base_url: {model_server.base_url!r}, "
        "criteria: [ok]}\n"
    )
    contract = contract.replace("land: merge", review + "land: merge")
    contract += "env: {OPENAI_API_KEY: local-test-key}\n"
    ledger, report = _run(repo, repo.contract("review.yaml", contract))
    _held(ledger, report)
