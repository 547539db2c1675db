"""A validator with ``on_fail: warn`` only warns, whatever keeps it from reaching a verdict: its
tool not installed, a timeout, a kill, a crash. Checked on real runs of the replay coder in a
real repository: the run lands, no attempt is spent on it, the payload says warn."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.model_server import HttpError, ModelServer, Turn
from support.repo import CHECK_TESTS, Repo, git, make_repo

from assay.adapters.store.sql import Ledger
from assay.core.contract import parse_contract
from assay.core.tasks import Task
from assay.core.vocab import EventKind
from assay.engine.local.runner import RunReport, run_task

# Each way a warn-only check can fail to reach a verdict.
UNRUNNABLE = {
    "not installed": {"run": "no-such-linter-anywhere check .", "why": "exit 127"},
    "not executable": {"run": "./src/slug.py", "why": "exit 126"},
    "timed out": {"run": "sleep 30", "timeout_seconds": 0.5, "why": "did not finish in 0.5 s"},
    # a kill is an exit code (137), a verdict: it warns, as any failure of a warn-only check
    "killed": {"run": "kill -9 $$", "why": "exited 137", "verdict": True},
}


def _contract(repo: Repo, checks: str, seats: int = 1) -> Path:
    return repo.contract(
        "warn.yaml",
        f"""task: Make slugify keep digits.
scope: {{allow: ["src/**"]}}
coder:
  kind: replay
  steps:
    - {{script: "{repo.put("fixed.py", "src/slug.py")}"}}
seats: {seats}
validators:
  - {{id: tests, kind: command, run: "{CHECK_TESTS}"}}
{checks}
land: merge
""",
    )


def _run(repo: Repo, contract_file: Path) -> tuple[Ledger, RunReport]:
    contract = parse_contract(contract_file.read_text())
    home = repo.root / ".assay"
    home.mkdir(exist_ok=True)
    ledger = Ledger.open(f"sqlite:///{home / 'assay.db'}")
    task = Task.new(id="t1", title="t", instruction=contract.task, now=datetime.now(UTC))
    ledger.add_task(task)
    report = run_task(repo=repo.root, home=home, ledger=ledger, task=task, contract=contract)
    return ledger, report


def _line(check_id: str, case: dict[str, object]) -> str:
    extra = f", timeout_seconds: {case['timeout_seconds']}" if "timeout_seconds" in case else ""
    run = str(case["run"]).replace('"', '\\"')
    return f'  - {{id: {check_id}, kind: command, run: "{run}", on_fail: warn{extra}}}'


@pytest.mark.parametrize("case", sorted(UNRUNNABLE))
def test_a_warn_only_check_that_cannot_run_warns_and_the_run_lands(
    tmp_path: Path, case: str
) -> None:
    repo = make_repo(tmp_path)
    ledger, report = _run(repo, _contract(repo, _line("lint", UNRUNNABLE[case])))
    payload = report.payload.to_json()
    assert payload["status"] == "merged", payload["reason"]
    assert payload["halt_type"] == "none"
    assert payload["task_status"] == "done" and payload["attempts"]["total"] == 1
    assert [h["outcome"] for h in payload["attempts"]["history"]] == ["warned"]
    lint = next(r for r in payload["validator_results"] if r["validator_id"] == "lint")
    errored = "verdict" not in UNRUNNABLE[case]
    assert (lint["severity"], lint["error"], lint["advisory"]) == ("warn", errored, True)
    assert UNRUNNABLE[case]["why"] in lint["justification"] + " ".join(lint["findings"])
    decision = payload["policy_decision"]
    assert decision["action"] == "proceed" and decision["error_count"] == 0
    assert decision["warn_count"] == 1
    said = [w for w in report.warnings if "validator lint could not run" in w]
    assert len(said) == int(errored) and all("on_fail: warn" in w for w in said)
    with ledger:
        events = ledger.events(run_id=report.run_id)
    (finished,) = [
        e.data
        for e in events
        if e.kind == EventKind.VALIDATOR_FINISHED and e.data["validator"] == "lint"
    ]
    assert (finished["severity"], finished["advisory"]) == ("warn", True)


def test_only_the_warn_check_errors_among_several_on_two_seats(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    checks = "\n".join(
        [
            _line("lint", UNRUNNABLE["not installed"]),
            '  - {id: types, kind: command, run: "true"}',
            '  - {id: style, kind: command, run: "exit 1", on_fail: warn}',
        ]
    )
    _, report = _run(repo, _contract(repo, checks, seats=2))
    payload = report.payload.to_json()
    assert payload["status"] == "merged", payload["reason"]
    assert payload["attempts"]["total"] == 1
    verdicts = {
        r["validator_id"]: (r["severity"], r["error"]) for r in payload["validator_results"]
    }
    assert verdicts["lint"] == ("warn", True) and verdicts["style"] == ("warn", False)
    assert verdicts["tests"] == verdicts["types"] == ("pass", False)
    assert "could not run, warned only: lint" in payload["policy_decision"]["justification"]
    # the merge commit names what each check gave, the one that could not run as an error
    body = git(repo.root, "log", "-1", "--format=%B")
    assert "lint: error" in body and "style: warn" in body and "tests: pass" in body


def test_a_blocking_check_that_cannot_run_still_halts(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    checks = '  - {id: lint, kind: command, run: "no-such-linter-anywhere ."}'
    _, report = _run(repo, _contract(repo, checks))
    payload = report.payload.to_json()
    assert payload["status"] == "failed" and payload["halt_type"] == "validator_error"
    lint = next(r for r in payload["validator_results"] if r["validator_id"] == "lint")
    assert (lint["severity"], lint["error"], lint["advisory"]) == ("block", True, False)


OUTAGE = Turn(error=HttpError(503, "server", "service unavailable", retry_after=0))
QUOTA = Turn(error=HttpError(429, "usage_limit", "usage limit reached", reset="1m"))


@pytest.mark.parametrize("lost", ["outage", "quota", "unreachable"])
def test_a_warn_only_judge_whose_model_is_lost_warns_and_the_run_lands(
    tmp_path: Path, model_server: ModelServer, lost: str
) -> None:
    # a provider fault or a quota would refund the run for a judge that may block; one that
    # may only warn is reported, and the run goes on
    model_server.script(*([OUTAGE] * 3 if lost == "outage" else [QUOTA]))
    base_url = model_server.base_url if lost != "unreachable" else "http://127.0.0.1:9/v1"
    repo = make_repo(tmp_path)
    review = (
        f'  - {{id: review, kind: judge, model: m, base_url: "{base_url}", '
        "criteria: [ok], on_fail: warn, timeout_seconds: 20}"
    )
    contract = _contract(repo, review).read_text() + "env: {OPENAI_API_KEY: local-test-key}\n"
    _, report = _run(repo, repo.contract("review.yaml", contract))
    payload = report.payload.to_json()
    assert payload["status"] == "merged", payload["reason"]
    assert payload["attempts"]["total"] == 1
    review_result = next(r for r in payload["validator_results"] if r["validator_id"] == "review")
    assert (review_result["severity"], review_result["error"]) == ("warn", True)
    assert any("validator review could not run" in w for w in report.warnings)
