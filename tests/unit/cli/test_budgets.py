"""A spending budget stops a runaway coder, through `assay run` (in-process).

The `llm` coder talks to a scripted server that answers every call with one more tool call,
forever; each answer reports a known usage. A budget is spent once the spending reaches it, and
the coder checks before every model call, so the server answers exactly ceil(budget / per call)
calls, never one more. Every token (and every known cost) the server handed out is in the
payload, the ledger's usage journal and its dispatch rows.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
from support.model_server import HttpError, ModelServer, RecordedRequest, Turn, Usage
from support.repo import CHECK_TESTS, Repo, make_repo
from support.spending import dispatch_tokens, journal, mismatches, payloads, usage_report

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[3] / "schemas" / "payload.schema.json").read_text()
)
PER_CALL = Usage(100, 20)  # 120 tokens an answer
PRICED = Usage(100, 20, cost=0.01)


def looping(usage: Usage) -> Turn:
    """An answer that asks for one more listing: a coder given it never finishes."""
    return Turn.call("list_files", {"path": "."}, usage=usage)


def llm_contract(
    repo: Repo, server: ModelServer, budgets: str = "", max_turns: int = 500, seats: int = 1
) -> Path:
    return repo.contract(
        "loop.yaml",
        f"""task: Make slugify keep digits.
coder: {{kind: llm, model: m, base_url: "{server.base_url}", max_turns: {max_turns}}}
seats: {seats}
validators:
  - {{id: tests, kind: command, run: "{CHECK_TESTS}"}}
budgets: {{max_attempts: 1{budgets}}}
land: merge
""",
    )


def run_json(repo: Repo, *args: str, expect: int) -> dict[str, Any]:
    done = repo.main("run", *args, "--json", OPENAI_API_KEY="local-test-key")
    assert done.returncode == expect, done.stderr
    payload: dict[str, Any] = json.loads(done.stdout)
    jsonschema.validate(payload, SCHEMA)
    return payload


def budget_halts(payload: dict[str, Any]) -> list[str]:
    """The details of the halt-budget-exhausted notices, wherever the payload lists them."""
    halts = payload["halts"]
    return [
        h["detail"]
        for h in (*halts["fired"], *halts["warnings"])
        if h["name"] == "halt-budget-exhausted"
    ]


def test_a_token_budget_stops_a_looping_coder_within_one_call(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    with ModelServer(when_exhausted=looping(PER_CALL)) as server:
        contract = llm_contract(repo, server, ", max_tokens: 1000")
        payload = run_json(repo, "--contract", str(contract), expect=3)
        handed = server.handed_out
        calls = len(server.completions)
    assert calls == math.ceil(1000 / PER_CALL.total_tokens) == handed.answers == 9
    assert (payload["status"], payload["task_status"]) == ("blocked", "held")
    figures = "the run spent 1,080 tokens of its 1,000-token budget (budgets.max_tokens: 1000)"
    assert figures in payload["reason"]
    assert budget_halts(payload) == [figures]  # fired the moment it was spent
    assert payload["usage"]["tokens"] == handed.tokens == 1080
    assert payload["usage"]["cost_usd"] is None  # the server gave no cost: unknown, not 0
    assert payload["usage"]["unpriced_dispatches"] == 1
    assert payload["attempts"]["history"] == [{"attempt": 1, "outcome": "error"}]
    ledger = journal(repo.root)
    assert mismatches(handed, ledger, [payload], usage_report(repo)) == []
    assert ledger.rows == 9  # each answer journaled as it arrived
    assert dispatch_tokens(repo.root, payload["run_id"]) == [1080]
    shown = json.loads(repo.main("task", "show", payload["task_id"], "--json").stdout)
    assert shown["status"] == "held" and figures in shown["hold_reason"]


def test_three_seats_each_stop_within_one_call_of_the_shared_budget(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    slow = replace(looping(PER_CALL), delay_seconds=0.05)  # the seats' calls overlap
    with ModelServer(when_exhausted=slow) as server:
        contract = llm_contract(repo, server, ", max_tokens: 1000", seats=3)
        payload = run_json(repo, "--contract", str(contract), "--max-tokens", "1000", expect=3)
        handed = server.handed_out
    # The budget is reached by the ninth answer; a seat whose call was in flight then gets
    # its answer, and stops before its next call.
    assert 9 <= handed.answers <= 9 + 2 and handed.answers == len(server.completions)
    assert payload["status"] == "blocked" and payload["usage"]["dispatches"] == 3
    assert sum(t or 0 for t in dispatch_tokens(repo.root, payload["run_id"])) == handed.tokens
    assert mismatches(handed, journal(repo.root), [payload], usage_report(repo)) == []


def test_a_cost_budget_given_by_flag_stops_it_at_the_call_that_reaches_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    with ModelServer(when_exhausted=looping(PRICED)) as server:
        contract = llm_contract(repo, server)  # no cap of its own: the flag's
        payload = run_json(repo, "--contract", str(contract), "--max-cost", "0.05", expect=3)
        handed = server.handed_out
    # $0.05 is reached (not passed) by the fifth answer: spent, so no sixth call.
    assert handed.answers == len(server.completions) == 5
    assert payload["status"] == "blocked"
    assert budget_halts(payload) == [
        "the run spent $0.05 of its $0.05 budget (budgets.max_cost_usd: 0.05)"
    ]
    assert payload["usage"]["cost_usd"] == payload["usage"]["priced_cost_usd"] == handed.cost
    assert handed.cost == 0.05 and payload["usage"]["tokens"] == handed.tokens == 600
    assert mismatches(handed, journal(repo.root), [payload], usage_report(repo)) == []


def test_a_task_budget_counts_a_refunded_run_before(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    outage = Turn(error=HttpError(503, "server", "service unavailable", retry_after=0))
    with ModelServer([looping(PER_CALL)] * 5, when_exhausted=outage) as server:
        contract = llm_contract(repo, server, ", task_max_tokens: 1000")
        # Five answers (600 tokens), then the provider fails: the run is refunded.
        first = run_json(repo, "--contract", str(contract), expect=1)
        assert first["attempt_spent"] is False and first["usage"]["tokens"] == 600
        server.when_exhausted = looping(PER_CALL)
        second = run_json(repo, "--task", first["task_id"], "--ignore-wait", expect=3)
        handed = server.handed_out
    # Its 600 tokens count: 4 more answers reach 1,080 and the task's budget stops the rerun.
    assert handed.answers == 9 and handed.tokens == 1080
    assert second["status"] == "blocked" and second["task_status"] == "held"
    assert budget_halts(second) == [
        "the task spent 1,080 tokens of its 1,000-token budget (across its runs) "
        "(budgets.task_max_tokens: 1000)"
    ]
    assert (first["usage"]["tokens"], second["usage"]["tokens"]) == (600, 480)
    assert (
        mismatches(handed, journal(repo.root), payloads(repo.root).values(), usage_report(repo))
        == []
    )


def test_warn_lets_a_spent_run_go_on(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    with ModelServer(when_exhausted=looping(PER_CALL)) as server:
        budgets = ", max_recovery: 0, max_tokens: 300, on_exhausted: warn"
        contract = llm_contract(repo, server, budgets, max_turns=6)
        done = repo.main("run", "--contract", str(contract), "--json", OPENAI_API_KEY="k")
        handed = server.handed_out
    payload = json.loads(done.stdout)
    assert handed.answers == 6  # its turn limit, not the budget, ended it
    # It ends as a coder that changed nothing does, not on the budget.
    assert done.returncode == 3 and payload["reason"] == "no attempt produced a change"
    assert "it goes on (budgets.on_exhausted: warn)" in done.stderr
    assert payload["usage"]["tokens"] == handed.tokens == 720
    assert mismatches(handed, journal(repo.root), [payload], usage_report(repo)) == []


def test_one_answer_without_a_cost_neither_hides_the_others_nor_the_budget(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    calls = itertools.count(1)

    def answer(request: RecordedRequest) -> Turn:
        return looping(PER_CALL if next(calls) == 3 else PRICED)  # the third has no cost

    with ModelServer(when_exhausted=answer) as server:
        contract = llm_contract(repo, server, ", max_recovery: 0, max_cost_usd: 0.05", max_turns=30)
        done = repo.main("run", "--contract", str(contract), "--json", OPENAI_API_KEY="k")
        handed = server.handed_out
    payload = json.loads(done.stdout)
    assert payload["usage"]["cost_usd"] is None  # one answer's cost is unknown
    assert payload["usage"]["priced_cost_usd"] == handed.priced_cost  # the known ones, summed
    assert mismatches(handed, journal(repo.root), [payload], usage_report(repo)) == []
    assert handed.answers == 6  # five priced answers reach $0.05


def test_a_queued_task_keeps_its_flag_budget_under_serve(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    with ModelServer(when_exhausted=looping(PER_CALL)) as server:
        contract = str(llm_contract(repo, server))
        added = repo.main(
            "task", "add", "--contract", contract, "--max-tokens", "500", "--json",
            OPENAI_API_KEY="k",
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        task_id = json.loads(added.stdout)["id"]
        served = repo.main("serve", "--once", "--poll", "0.1", "--json", OPENAI_API_KEY="k")
        handed = server.handed_out
    assert served.returncode == 0, served.stderr
    assert json.loads(served.stdout)["closed"] == {task_id: "held"}
    assert handed.answers == len(server.completions) == math.ceil(500 / 120) == 5
    runs = payloads(repo.root)
    assert [p["status"] for p in runs.values()] == ["blocked"]
    assert mismatches(handed, journal(repo.root), runs.values(), usage_report(repo)) == []


def test_a_budget_spent_by_a_judge_validator_holds_the_task(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    fix = Turn.call(
        "replace", {"path": "src/slug.py", "old": "isalpha", "new": "isalnum"}, usage=Usage(400, 30)
    )
    finish = Turn.call("finish", {"summary": "slugify keeps digits"}, usage=Usage(450, 9))
    verdict = {"severity": "pass", "justification": "Digits are kept.", "findings": []}
    judged = Turn.call("verdict", verdict, usage=Usage(700, 40))
    with ModelServer([fix, finish, judged]) as server:
        contract = repo.contract(
            "judged.yaml",
            f"""task: Make slugify keep digits.
coder: {{kind: llm, model: m, base_url: "{server.base_url}"}}
validators:
  - {{id: tests, kind: command, run: "{CHECK_TESTS}"}}
  - {{id: review, kind: judge, model: m, base_url: "{server.base_url}", criteria: ["ok"]}}
budgets: {{max_tokens: 1000}}
land: merge
""",
        )
        done = repo.main("run", "--contract", str(contract), "--json", OPENAI_API_KEY="k")
        handed = server.handed_out
    payload = json.loads(done.stdout)
    assert payload["usage"]["tokens"] == handed.tokens == 1629
    assert mismatches(handed, journal(repo.root), [payload], usage_report(repo)) == []
    # Judges spend the run's budget as coders do: the run stops before it lands, held.
    assert done.returncode == 3, done.stderr
    assert (payload["status"], payload["task_status"]) == ("blocked", "held")
    assert "halt-budget-exhausted" in [h["name"] for h in payload["halts"]["warnings"]]
