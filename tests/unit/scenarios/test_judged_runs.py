"""Competing seats under blind judges, through `assay run` (in-process) and a scripted model server.

The scripted judges read the blind request the way a model would: they find the candidate
whose diff keeps digits and rank it first, whatever label the seeded shuffle gave it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
from support.model_server import HttpError, ModelServer, RecordedRequest
from support.repo import CHECK_TESTS, FIXED, Repo, make_repo
from support.script import Turn

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[3] / "schemas" / "payload.schema.json").read_text()
)
CANDIDATE = re.compile(
    r"Candidate (\w+) \(files: [^)]*\):\n<<<UNTRUSTED-DATA (\w+)>>>\n(.*?)\n<<<END", re.S
)


def digits_first(request: RecordedRequest) -> list[str]:
    """The labels the request shows, the candidate whose diff keeps digits first."""
    text = json.dumps(request.body)
    text = json.loads(text)["messages"][1]["content"]
    blocks = {label: diff for label, _nonce, diff in CANDIDATE.findall(text)}
    return sorted(blocks, key=lambda label: "isalnum" not in blocks[label])


def rank_by_digits(request: RecordedRequest) -> Turn:
    best = digits_first(request)
    return Turn.call("rank", {"ranking": best, "reasons": "the one that keeps digits is right"})


def three_seat_contract(
    repo: Repo, server: ModelServer, judges: int = 3, judge: str = "", env: str = ""
) -> Path:
    """Three seats (wrong, fixed, wrong) and LLM judges on ``server``; the judges' key comes
    from the exported environment (``run`` exports it) unless ``env`` declares one."""
    steps = [
        f'{{kind: replay, steps: [{{script: "{repo.put(f"{name}.py", "src/slug.py")}"}}]}}'
        for name in ("wrong", "fixed", "wrong")
    ]
    return repo.contract(
        "judged.yaml",
        f"""task: Make slugify keep digits.
seats: 3
judges: {judges}
coder: [{", ".join(steps)}]
judge: {{kind: llm, model: judge-model, base_url: "{server.base_url}"{judge}}}
validators: [{{id: tests, kind: command, run: "{CHECK_TESTS}"}}]
budgets: {{max_attempts: 3, max_recovery: 0}}
land: merge
{env}
""",
    )


def run(repo: Repo, contract: Path, expect: int, **env: str) -> dict[str, Any]:
    return run_showing(repo, contract, expect, **env)[0]


def run_showing(repo: Repo, contract: Path, expect: int, **env: str) -> tuple[dict[str, Any], str]:
    """The payload and stderr of ``assay run``, with the judges' key exported as an operator
    would (``OPENAI_API_KEY``), and ``env`` too."""
    done = repo.main("run", "--contract", str(contract), "--json", **{**KEY, **env})
    assert done.returncode == expect, done.stderr
    payload: dict[str, Any] = json.loads(done.stdout)
    jsonschema.validate(payload, SCHEMA)
    return payload, done.stderr


KEY = {"OPENAI_API_KEY": "local-test-key"}


def test_three_seats_three_blind_judges_pick_the_right_candidate(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    with ModelServer() as server:
        server.script(rank_by_digits, rank_by_digits, rank_by_digits)
        payload = run(repo, three_seat_contract(repo, server), 0)
        requests = list(server.requests)
    assert len(requests) == 3
    assert all(r.headers.get("authorization") == "Bearer local-test-key" for r in requests)
    assert payload["status"] == "merged"
    assert (repo.root / "src" / "slug.py").read_text() == FIXED
    tally = payload["tally"]
    assert tally["met_quorum"] and tally["present"] == 3
    winner = next(c for c in payload["candidates"] if c["label"] == tally["winner"])
    assert winner["seat"] == 2
    assert sorted(c["label"] for c in payload["candidates"]) == ["A", "B", "C"]
    bodies = [json.dumps(r.body) for r in requests]
    assert all("assay/" not in b and payload["run_id"] not in b for b in bodies)  # blind
    orders = [re.findall(r"Candidate (\w) \(", r.body["messages"][1]["content"]) for r in requests]
    assert all(sorted(o) == ["A", "B", "C"] for o in orders)


def test_judges_lost_to_quota_stall_the_run_and_refund_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    with ModelServer() as server:
        server.script(rank_by_digits, Turn.rate_limited(), Turn.rate_limited())
        payload = run(repo, three_seat_contract(repo, server), 1)
    assert payload["status"] == "stalled" and not payload["attempt_spent"]
    assert payload["halt_type"] == "environment_error"
    shown = json.loads(repo.main("task", "show", payload["task_id"], "--json").stdout)
    assert shown["runs"][-1]["settle_row"] == "stalled_quota"
    assert shown["attempts"] == 0


def test_judges_that_give_no_usable_ranking_stall_and_spend(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    garbage = Turn.reply("I think they are all fine.")
    with ModelServer() as server:
        server.script(*[garbage] * 9)
        payload = run(repo, three_seat_contract(repo, server), 1)
    assert payload["status"] == "stalled" and payload["attempt_spent"]
    assert payload["halt_type"] == "validator_error"
    shown = json.loads(repo.main("task", "show", payload["task_id"], "--json").stdout)
    assert shown["runs"][-1]["settle_row"] == "stalled_or_failed"


def test_three_seats_two_rate_limited_the_third_wins_uncontested(tmp_path: Path) -> None:
    import os
    import sys

    standins = Path(__file__).resolve().parents[2] / "support" / "standins"
    search = os.pathsep.join([str(standins), str(Path(sys.executable).parent), "/usr/bin:/bin"])
    repo = make_repo(tmp_path)
    fixed = f'{{kind: replay, steps: [{{script: "{repo.put("fixed.py", "src/slug.py")}"}}]}}'
    contract = repo.contract(
        "mixed.yaml",
        f"""task: Make slugify keep digits.
seats: 3
judges: 3
coder: [{{kind: claude}}, {fixed}, {{kind: claude}}]
judge: {{kind: llm, model: judge-model, base_url: "http://127.0.0.1:9"}}
validators: [{{id: tests, kind: command, run: "{CHECK_TESTS}"}}]
land: merge
env: {json.dumps({"PATH": search, "STANDIN_SCENARIO": "rate_limit", "ANTHROPIC_API_KEY": "k"})}
""",
    )
    payload = run(repo, contract, 0)
    assert payload["status"] == "merged" and payload["task_status"] == "done"
    lost = [c["seat"] for c in payload["candidates"] if c["lost_to_quota"]]
    assert lost == [1, 3]
    assert payload["tally"] is None  # one viable candidate needs no judge


def test_two_judges_disagree_one_rate_limited_stalls_on_quota(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    with ModelServer() as server:
        server.script(rank_by_digits, Turn.rate_limited())
        payload = run(repo, three_seat_contract(repo, server, judges=2), 1)
    assert payload["status"] == "stalled" and not payload["attempt_spent"]
    assert payload["tally"]["present"] == 1 and payload["tally"]["quorum"] == 2


def test_a_key_declared_in_the_contract_env_reaches_the_judges(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    declared = "env: {OPENAI_API_KEY: contract-key}"
    with ModelServer() as server:
        server.script(rank_by_digits, rank_by_digits, rank_by_digits)
        payload = run(repo, three_seat_contract(repo, server, env=declared), 0)
        requests = list(server.requests)
    assert payload["status"] == "merged"
    assert [r.headers.get("authorization") for r in requests] == ["Bearer contract-key"] * 3


def test_judges_read_the_key_their_api_key_env_names(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    with ModelServer() as server:
        contract = three_seat_contract(repo, server, judge=", api_key_env: JUDGE_KEY")
        server.script(rank_by_digits, rank_by_digits, rank_by_digits)
        payload = run(repo, contract, 0, JUDGE_KEY="named-key")
        requests = list(server.requests)
    assert payload["status"] == "merged"
    assert [r.headers.get("authorization") for r in requests] == ["Bearer named-key"] * 3


def test_a_judge_without_its_key_is_refused_before_any_seat_runs(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    # ASSAY_* variables are never inherited by the test's `assay`, so this one is surely unset.
    judge = ", api_key_env: ASSAY_TEST_UNSET_KEY"
    with ModelServer() as server:
        contract = three_seat_contract(repo, server, judges=2, judge=judge)
        done = repo.main("run", "--contract", str(contract), "--json", **KEY)
        assert not server.requests
    assert done.returncode == 2 and done.stdout == ""
    missing = "reads its API key from $ASSAY_TEST_UNSET_KEY, which is not set"
    assert done.stderr.startswith(f"assay: judge 1 (llm): the judge {missing}")
    assert len(done.stderr.splitlines()) == 1  # one judge spec, said once
    assert repo.payloads() == []


def test_judges_lost_to_a_provider_outage_refund_the_run_and_wait(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    outage = Turn(error=HttpError(503, "server", "service unavailable", retry_after=0))
    with ModelServer(when_exhausted=outage) as server:
        payload = run(repo, three_seat_contract(repo, server, judges=2), 1)
        assert len(server.completions) == 6  # each judge's call, retried to 3 of 3
    assert payload["status"] == "failed" and payload["halt_type"] == "environment_error"
    assert payload["attempt_spent"] is False and payload["task_status"] == "failed"
    reason = payload["reason"]
    assert reason.startswith(
        "no quorum: 0 usable ranking(s) of 2 needed, 2 judge(s) lost to a provider fault: "
        "judge 1 (llm judge-model): HTTP 503"
    )
    assert "judge 2 (llm judge-model): HTTP 503" in reason and reason.endswith("3 of 3 calls")
    shown = json.loads(repo.main("task", "show", payload["task_id"], "--json").stdout)
    assert shown["runs"][-1]["settle_row"] == "failed_machine_fault"
    assert shown["attempts"] == 0 and shown["waiting"] is True
    assert "lost to a provider fault" in repo.main("task", "show", payload["task_id"]).stdout


def _ranked(repo: Repo, run_id: str) -> list[dict[str, Any]]:
    from assay.adapters.store.sql import Ledger

    with Ledger(f"sqlite:///{repo.root / '.assay' / 'assay.db'}") as ledger:
        return [e.data for e in ledger.events(run_id=run_id) if e.kind == "judges.ranked"]


def test_each_judges_ranking_and_reasons_are_kept_with_the_scores(tmp_path: Path) -> None:
    """The run keeps what each judge said (``judges.ranked``: its ranking and reasons, the
    first choices and Borda points), for the dashboard to show."""
    repo = make_repo(tmp_path)
    with ModelServer() as server:
        server.script(rank_by_digits, rank_by_digits, rank_by_digits)
        payload = run(repo, three_seat_contract(repo, server), 0)
    (ranked,) = _ranked(repo, payload["run_id"])
    tally = payload["tally"]
    assert ranked["first_choices"] == tally["first_choices"]
    assert ranked["borda"] == tally["borda"] and ranked["tie_break"] is None
    judges = ranked["judges"]
    assert [(j["judge"], j["round"], j["name"]) for j in judges] == [
        (1, 0, "llm judge-model"), (2, 0, "llm judge-model"), (3, 0, "llm judge-model"),
    ]  # fmt: skip
    assert all(j["ranking"][0] == tally["winner"] and len(j["ranking"]) == 3 for j in judges)
    assert {j["reasons"] for j in judges} == {"the one that keeps digits is right"}
    assert all(j["reasons_cut"] == 0 and j["error"] is None for j in judges)


def test_a_deliberation_is_kept_round_by_round_and_a_huge_reason_is_bounded(
    tmp_path: Path,
) -> None:
    """Two judges split, then agree after reading each other: both rounds are kept; a 100 KB
    reason is kept to its first 20,000 characters, the rest counted."""
    import threading

    asked: list[int] = []
    guard = threading.Lock()
    huge = "<b>wrong</b> \u202e" + "x" * 100_000

    def split_then_agree(request: RecordedRequest) -> Turn:
        text = json.loads(json.dumps(request.body))["messages"][1]["content"]
        best = digits_first(request)
        if "You ranked these candidates before" in text:
            return Turn.call("rank", {"ranking": best, "reasons": "agreed"})
        with guard:
            asked.append(1)
            second = len(asked) == 2
        if second:  # the other judge: the right one last, at length
            return Turn.call("rank", {"ranking": best[1:] + best[:1], "reasons": huge})
        return Turn.call("rank", {"ranking": best, "reasons": "digits are kept"})

    repo = make_repo(tmp_path)
    with ModelServer() as server:
        server.script(*[split_then_agree] * 4)
        contract = three_seat_contract(repo, server, judges=2)
        contract.write_text(contract.read_text() + "deliberate_rounds: 1\n")
        payload = run(repo, contract, 0)
    (ranked,) = _ranked(repo, payload["run_id"])
    judges = ranked["judges"]
    assert [(j["judge"], j["round"]) for j in judges] == [(1, 0), (2, 0), (1, 1), (2, 1)]
    first = {j["judge"]: j for j in judges if j["round"] == 0}
    cut = next(j for j in first.values() if j["reasons_cut"])
    assert len(cut["reasons"]) == 20_000 and cut["reasons_cut"] == len(huge) - 20_000
    assert cut["reasons"].startswith("<b>wrong</b> \u202e")  # kept as said: the page escapes
    assert [j["reasons"] for j in judges if j["round"] == 1] == ["agreed", "agreed"]
    assert ranked["first_choices"][payload["tally"]["winner"]] == 2
