"""One run per settle row, through the real engine and the `assay` command (in-process).

Each scenario checks what settle made of the task, the ledger's counters and the payload.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import jsonschema
from support.repo import CHECK_TESTS, FIXED, Repo, make_repo, replay_contract

STANDINS = Path(__file__).resolve().parents[2] / "support" / "standins"
SEARCH_PATH = os.pathsep.join([str(STANDINS), str(Path(sys.executable).parent), "/usr/bin:/bin"])
SCHEMA = json.loads(
    (Path(__file__).resolve().parents[3] / "schemas" / "payload.schema.json").read_text()
)


# The stand-ins call no provider, but claude is never started without a key.
KEY = {"ANTHROPIC_API_KEY": "standin-key"}


def run(repo: Repo, contract: Path, expect: int) -> dict[str, Any]:
    done = repo.main("run", "--contract", str(contract), "--json")
    assert done.returncode == expect, done.stderr
    payload: dict[str, Any] = json.loads(done.stdout)
    jsonschema.validate(payload, SCHEMA)
    return payload


def task_and_ledger(repo: Repo, task_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    task = json.loads(repo.main("task", "show", task_id, "--json").stdout)
    ledger = json.loads(repo.main("ledger", "show", task_id, "--json").stdout)
    return task, ledger


def row_of(task: dict[str, Any]) -> str:
    return str(task["runs"][-1]["settle_row"])


def test_succeeded(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    payload = run(repo, replay_contract(repo, "fixed"), 0)
    task, ledger = task_and_ledger(repo, payload["task_id"])
    assert row_of(task) == "succeeded" and task["status"] == "done"
    assert payload["attempt_spent"] and ledger["stage_state"]["task"]["attempts"] == 1


def test_blocked_spends_the_attempt_and_stays_runnable(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = replay_contract(repo, "wrong", extra="budgets: {max_attempts: 3, max_recovery: 1}")
    payload = run(repo, contract, 1)
    task, ledger = task_and_ledger(repo, payload["task_id"])
    assert payload["status"] == "blocked" and row_of(task) == "blocked"
    assert task["status"] == "failed" and task["attempts"] == 1
    assert ledger["stage_state"]["recover"]["attempts"] == 1


def test_blocked_on_the_last_attempt_is_held(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = replay_contract(repo, "wrong", extra="budgets: {max_attempts: 1, max_recovery: 0}")
    payload = run(repo, contract, 3)
    task, _ = task_and_ledger(repo, payload["task_id"])
    assert task["status"] == "held" and task["held_by"] == "machine"
    assert "attempts exhausted" in task["hold_reason"]


def test_verified_noop_is_held_never_done(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo.root / "src" / "slug.py").write_text(FIXED)
    from support.repo import git

    git(repo.root, "commit", "-qam", "already fixed")
    report = json.dumps({"summary": "NO CHANGE NEEDED: test_digits already passes at HEAD"})
    contract = repo.contract(
        "noop.yaml",
        f"""task: Make slugify keep digits.
seats: 2
coder: {{kind: replay, steps: [{{report: '{report}'}}]}}
validators: [{{id: tests, kind: command, run: "{CHECK_TESTS}"}}]
land: merge
""",
    )
    payload = run(repo, contract, 3)
    task, _ = task_and_ledger(repo, payload["task_id"])
    assert payload["status"] == "verified_noop" and row_of(task) == "verified_noop"
    assert task["status"] == "held" and task["held_by"] == "machine"


def test_validator_error_fails_the_run_and_spends_the_attempt(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = repo.contract(
        "verr.yaml",
        f"""task: x
coder: {{kind: replay, steps: [{{script: "{repo.put("fixed.py", "src/slug.py")}"}}]}}
validators: [{{id: slow, kind: command, run: "sleep 5", timeout_seconds: 0.3}}]
land: merge
""",
    )
    payload = run(repo, contract, 1)
    task, _ = task_and_ledger(repo, payload["task_id"])
    assert payload["halt_type"] == "validator_error" and row_of(task) == "stalled_or_failed"
    assert task["attempts"] == 1


def test_every_seat_lost_to_quota_refunds_the_attempt(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    env = json.dumps({"PATH": SEARCH_PATH, "STANDIN_SCENARIO": "rate_limit", **KEY})
    contract = repo.contract(
        "quota.yaml",
        f"""task: x
seats: 3
coder: {{kind: claude}}
land: merge
env: {env}
""",
    )
    payload = run(repo, contract, 1)
    task, ledger = task_and_ledger(repo, payload["task_id"])
    assert row_of(task) == "failed_quota_no_viable" and not payload["attempt_spent"]
    assert task["attempts"] == 0 and ledger["stage_state"]["task"]["attempts"] == 0
    assert all(c["lost_to_quota"] for c in payload["candidates"])
    assert ledger["stage_state"]["dispatch"]["attempts"] == 3


def test_a_key_the_provider_refuses_holds_the_task_and_spends_nothing(tmp_path: Path) -> None:
    """The preflight saw a key; claude's provider refused it ("Please run /login"): a setting
    the operator controls, so the task is held with what to set, never refunded and retried,
    and claude's request to log in (which a seat never uses) is not passed on."""
    repo = make_repo(tmp_path)
    env = json.dumps({"PATH": SEARCH_PATH, "STANDIN_SCENARIO": "auth", **KEY})
    contract = repo.contract(
        "refused.yaml",
        f"""task: x
seats: 2
coder: {{kind: claude}}
land: merge
env: {env}
""",
    )
    done = repo.main("run", "--contract", str(contract), "--json")
    assert done.returncode == 3, done.stderr  # held for a human
    payload: dict[str, Any] = json.loads(done.stdout)
    jsonschema.validate(payload, SCHEMA)
    task, ledger = task_and_ledger(repo, payload["task_id"])
    assert row_of(task) == "unrunnable" and not payload["attempt_spent"]
    assert (task["status"], task["held_by"], task["attempts"]) == ("held", "machine", 0)
    assert task["waiting"] is False and ledger["stage_state"]["task"]["attempts"] == 0
    assert payload["reason"].startswith(
        "this machine cannot run the task as set: seat 1 (claude): claude: no usable API key"
    )
    assert "set ANTHROPIC_API_KEY" in task["hold_reason"]
    assert "/login" not in payload["reason"] and "/login" not in done.stderr
    assert ledger["stage_state"]["dispatch"]["attempts"] == 2  # one wave, never again


def test_every_seat_lost_to_a_provider_fault_refunds_the_attempt(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    env = json.dumps({"PATH": SEARCH_PATH, "STANDIN_SCENARIO": "server_error", **KEY})
    contract = repo.contract(
        "overloaded.yaml",
        f"""task: x
seats: 2
coder: {{kind: claude}}
land: merge
env: {env}
""",
    )
    payload = run(repo, contract, 1)
    task, ledger = task_and_ledger(repo, payload["task_id"])
    assert row_of(task) == "failed_machine_fault" and not payload["attempt_spent"]
    assert task["attempts"] == 0 and ledger["stage_state"]["task"]["attempts"] == 0
    assert task["waiting"] is True
    assert payload["reason"].startswith(
        "every seat lost to a provider fault: claude: API Error: 529"
    )
    assert all(
        c["lost_to_provider_fault"] and not c["lost_to_quota"] for c in payload["candidates"]
    )
    assert ledger["stage_state"]["dispatch"]["attempts"] == 2
