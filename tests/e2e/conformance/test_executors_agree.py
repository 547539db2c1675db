"""The scenario suite through both executors: the payloads agree field by field.

Each scenario's repository is made once and copied (so both start from the same commit); the
local executor runs it with ``assay run`` (SQLite), the Temporal executor with ``assay task
add`` + a worker process + ``assay serve --temporal --once`` (PostgreSQL, the session's dev
server). The worker is a process; the local run, the submitter and the reads of the ledgers
run in this process (``Repo.main``, ``run_assay``: the same argv, folder and
environment), a few seconds less each. Ids and times aside (``support.conformance``), the
payloads must be equal, and so must the ledger's counters and what settle made of the task.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support.conformance import differences, normalise
from support.in_process import run_assay
from support.in_process import show_json as show
from support.model_server import ModelServer, RecordedRequest
from support.repo import CHECK_TESTS, WRONG, Repo, git, make_repo, replay_contract
from support.script import Turn, Usage
from support.services import require_temporal_executor
from support.temporal import DevServer, ExternalServer
from support.workers import Worker, serve_args, service_env

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((ROOT / "schemas" / "payload.schema.json").read_text())
STANDINS = ROOT / "tests" / "support" / "standins"
SEARCH_PATH = os.pathsep.join([str(STANDINS), str(Path(sys.executable).parent), "/usr/bin:/bin"])
KEY = {"OPENAI_API_KEY": "local-test-key"}
CANDIDATE = re.compile(
    r"Candidate (\w+) \(files: [^)]*\):\n<<<UNTRUSTED-DATA (\w+)>>>\n(.*?)\n<<<END", re.S
)


@dataclass(frozen=True)
class Scenario:
    """A contract for a repository, what `assay run` exits with, the env both executors get."""

    contract: Callable[[Repo, ModelServer], Path]
    exit_code: int
    status: str
    env: dict[str, str]
    judge_turns: int = 0  # scripted judge replies per executor


def _halt(repo: Repo, _server: ModelServer) -> Path:
    fire = (
        f"{Path(sys.executable).parent / 'assay'} halt check --dispatch-id $ASSAY_DISPATCH_ID "
        "--condition halt-irreversible-action --fire --evidence 'needs a force-push'; "
        f"{repo.put('fixed.py', 'src/slug.py')}"
    )
    return repo.contract(
        "halt.yaml",
        f"""task: x
coder: {{kind: command, command: "{fire}"}}
validators: [{{id: tests, kind: command, run: "{CHECK_TESTS}"}}]
land: merge
""",
    )


def _standin_claude(scenario: str, seats: int) -> str:
    # The stand-in calls no provider, but claude is never started without a key.
    env = {"PATH": SEARCH_PATH, "STANDIN_SCENARIO": scenario, "ANTHROPIC_API_KEY": "k"}
    return (
        f"task: x\nseats: {seats}\ncoder: {{kind: claude}}\nland: merge\nenv: {json.dumps(env)}\n"
    )


def _quota(repo: Repo, _server: ModelServer) -> Path:
    return repo.contract("quota.yaml", _standin_claude("rate_limit", 3))


def _refused_key(repo: Repo, _server: ModelServer) -> Path:
    # The provider refuses the key mid-run: held on either executor, the attempt not spent.
    return repo.contract("refused.yaml", _standin_claude("auth", 2))


def _judged(repo: Repo, server: ModelServer) -> Path:
    # Three different diffs, so a judge that reads them ranks all three the same way whatever
    # order its blind labels came in (two equal diffs would be ordered by the shuffle, which is
    # seeded by the run id and so differs between the executors).
    (repo.fixes / "title.py").write_text(WRONG.replace("upper", "title"))
    steps = [
        f'{{kind: replay, steps: [{{script: "{repo.put(f"{name}.py", "src/slug.py")}"}}]}}'
        for name in ("wrong", "fixed", "title")
    ]
    return repo.contract(
        "judged.yaml",
        f"""task: Make slugify keep digits.
seats: 3
judges: 3
coder: [{", ".join(steps)}]
judge: {{kind: llm, model: judge-model, base_url: "{server.base_url}"}}
validators: [{{id: tests, kind: command, run: "{CHECK_TESTS}"}}]
budgets: {{max_attempts: 3, max_recovery: 0}}
land: merge
""",
    )


def _spent(repo: Repo, server: ModelServer) -> Path:
    # A coder that never finishes, stopped by its run's token budget on either executor: the
    # worker journals and checks each answer as the local executor does.
    server.when_exhausted = Turn.call("list_files", {"path": "."}, usage=Usage(100, 20))
    return repo.contract(
        "spent.yaml",
        f"""task: x
coder: {{kind: llm, model: m, base_url: "{server.base_url}", max_turns: 40}}
validators: [{{id: tests, kind: command, run: "{CHECK_TESTS}"}}]
budgets: {{max_tokens: 1000}}
land: merge
""",
    )


def _warn_unrunnable(repo: Repo, _server: ModelServer) -> Path:
    # A warn-only check whose tool is not installed only warns, on either executor.
    lint = '{id: lint, kind: command, run: "no-such-linter-anywhere .", on_fail: warn}'
    text = replay_contract(repo, "fixed").read_text()
    return repo.contract("warn.yaml", text.replace("land: merge", f"  - {lint}\nland: merge"))


SCENARIOS: dict[str, Scenario] = {
    "passes": Scenario(lambda r, _s: replay_contract(r, "fixed"), 0, "merged", {}),
    "blocked_then_passes": Scenario(
        lambda r, _s: replay_contract(r, "wrong", "fixed", land="branch"), 0, "ready", {}
    ),
    "recovery_spent_held": Scenario(
        lambda r, _s: replay_contract(
            r, "wrong", extra="budgets: {max_attempts: 1, max_recovery: 1}"
        ),
        3,
        "blocked",
        {},
    ),
    "judged_seats": Scenario(_judged, 0, "merged", KEY, judge_turns=3),
    "fired_halt": Scenario(_halt, 3, "blocked", {}),
    "quota_refund": Scenario(_quota, 1, "failed", {}),
    "unrunnable_held": Scenario(_refused_key, 3, "failed", {}),
    "budget_spent_held": Scenario(_spent, 3, "blocked", KEY),
    "warn_check_cannot_run": Scenario(_warn_unrunnable, 0, "merged", {}),
}


def rank_by_digits(request: RecordedRequest) -> Turn:
    """A judge that reads the diffs: the one that keeps digits first, then the upper-casing
    one, then the title-casing one, whatever their labels."""
    text = json.loads(json.dumps(request.body))["messages"][1]["content"]
    blocks = {label: diff for label, _nonce, diff in CANDIDATE.findall(text)}
    best = sorted(blocks, key=lambda label: [w not in blocks[label] for w in ("isalnum", "upper")])
    return Turn.call("rank", {"ranking": best, "reasons": "the one that keeps digits is right"})


def local_run(repo: Repo, contract: Path, scenario: Scenario) -> dict[str, Any]:
    done = repo.main("run", "--contract", str(contract), "--json", **scenario.env)
    assert done.returncode == scenario.exit_code, done.stderr
    payload: dict[str, Any] = json.loads(done.stdout)
    return payload


def temporal_run(
    repo: Repo, contract: Path, scenario: Scenario, address: str, database_url: str
) -> tuple[dict[str, Any], str]:
    env = service_env(database_url, **scenario.env)
    queue = f"conformance-{uuid.uuid4().hex[:10]}"
    worker = Worker(address, repo.root, repo.root.parent / "worker-home", database_url, queue)
    worker.env = dict(scenario.env)
    with worker:
        task_id: str = show(repo.root, "task", "add", "--contract", str(contract), env=env)["id"]
        served = run_assay(serve_args(address, queue), cwd=repo.root, env=env)
        assert served.returncode == 0, f"{served.stderr}\nworker:\n{worker.tail()}"
    task = show(repo.root, "task", "show", task_id, env=env)
    assert len(task["runs"]) == 1, task  # one run: never submitted twice
    payload: dict[str, Any] = show(repo.root, "payload", "show", task["runs"][0]["id"], env=env)
    return payload, task_id


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_both_executors_make_the_same_payload(
    name: str,
    tmp_path: Path,
    temporal_server: DevServer | ExternalServer,
    postgres_url: str,
    model_server: ModelServer,
) -> None:
    require_temporal_executor()
    scenario = SCENARIOS[name]
    server = model_server
    if scenario.judge_turns:
        server.script(*[rank_by_digits] * (2 * scenario.judge_turns))
    made = make_repo(tmp_path / "local")
    contract = scenario.contract(made, server)
    shutil.copytree(made.root, tmp_path / "temporal" / "repo", symlinks=True)
    twin = Repo(root=tmp_path / "temporal" / "repo", fixes=made.fixes)
    git(twin.root, "update-index", "-q", "--refresh")  # a copy's index has stale stat data

    local = local_run(made, contract, scenario)
    remote, task_id = temporal_run(twin, contract, scenario, temporal_server.address, postgres_url)
    for payload in (local, remote):
        jsonschema.validate(payload, SCHEMA)
        assert payload["status"] == scenario.status, payload["reason"]
    found = differences(normalise(local), normalise(remote))
    assert not found, "the executors disagree:\n" + "\n".join(found)

    env = service_env(postgres_url, **scenario.env)
    local_env = made.environment(**scenario.env)
    local_task = show(made.root, "task", "show", local["task_id"], env=local_env)
    remote_task = show(twin.root, "task", "show", task_id, env=env)
    for key in ("status", "attempts", "hold_source"):
        assert local_task.get(key) == remote_task.get(key), key
    assert local_task["runs"][-1]["settle_row"] == remote_task["runs"][-1]["settle_row"]
    local_ledger = show(made.root, "ledger", "show", local["task_id"], env=local_env)
    remote_ledger = show(twin.root, "ledger", "show", task_id, env=env)
    found = differences(local_ledger["stage_state"], remote_ledger["stage_state"])
    assert not found, "the ledgers' counters disagree:\n" + "\n".join(found)
