"""`assay run` with real adapters: stand-in claude/codex/aider, and the llm coder and an LLM
judge against the scripted model server."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import jsonschema
import pytest
from support.model_server import ModelServer
from support.repo import CHECK_TESTS, FIXED, git, make_repo
from support.script import Turn

STANDINS = Path(__file__).resolve().parents[2] / "support" / "standins"
SCHEMA = json.loads(
    (Path(__file__).resolve().parents[3] / "schemas" / "payload.schema.json").read_text()
)
SEARCH_PATH = os.pathsep.join([str(STANDINS), str(Path(sys.executable).parent), "/usr/bin:/bin"])


def standin_contract(kind: str, scenario: str, **extra: str) -> str:
    env = {
        "PATH": SEARCH_PATH,
        "STANDIN_SCENARIO": scenario,
        "STANDIN_EDIT_FILE": "src/slug.py",
        "STANDIN_EDIT_CONTENT": FIXED,
        # the stand-ins call no provider, but an agent is never started without its key
        "ANTHROPIC_API_KEY": "standin-key",
        "OPENAI_API_KEY": "standin-key",
        **extra,
    }
    return f"""task: Make slugify keep digits.
coder: {{kind: {kind}, model: some-model}}
validators: [{{id: tests, kind: command, run: "{CHECK_TESTS}"}}]
budgets: {{max_attempts: 3, max_recovery: 1}}
land: merge
env: {json.dumps(env)}
"""


@pytest.mark.parametrize("kind", ["claude", "codex", "aider"])
def test_a_standin_agent_edits_and_the_run_merges(tmp_path: Path, kind: str) -> None:
    repo = make_repo(tmp_path)
    contract = repo.contract(f"{kind}.yaml", standin_contract(kind, "edit"))
    done = repo.main("run", "--contract", str(contract), "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    jsonschema.validate(payload, SCHEMA)
    assert payload["status"] == "merged"
    assert payload["candidates"][0]["coder"] == kind
    assert payload["usage"]["tokens"] > 0, "usage read from the tool's own output"
    assert (repo.root / "src" / "slug.py").read_text() == FIXED


def test_claude_turn_limit_is_turn_budget_and_fires_the_warn_halt(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = repo.contract("turns.yaml", standin_contract("claude", "max_turns"))
    done = repo.main("run", "--contract", str(contract), "--json")
    payload = json.loads(done.stdout)
    jsonschema.validate(payload, SCHEMA)
    assert payload["candidates"][0]["stop_reason"] == "turn_budget"
    assert "halt-budget-exhausted" in [h["name"] for h in payload["halts"]["warnings"]]


def test_a_missing_agent_binary_is_refused_with_an_install_hint_before_any_run(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    contract = repo.contract(
        "missing.yaml",
        f"""task: x
coder: {{kind: claude}}
env: {{PATH: "{Path(sys.executable).parent}:/usr/bin:/bin", ANTHROPIC_API_KEY: k}}
""",
    )
    done = repo.main("run", "--contract", str(contract), "--json")
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr == (
        "assay: coder claude: claude not found on PATH: install it with "
        "`npm install -g @anthropic-ai/claude-code`\n"
    )
    assert not (repo.root / ".assay").exists()


def test_llm_coder_and_llm_judge_against_the_model_server(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    with ModelServer() as server:
        server.script(
            Turn.call("read_file", {"path": "src/slug.py"}),
            Turn.call("write_file", {"path": "src/slug.py", "content": FIXED}),
            Turn.call("run_validator", {"id": "tests"}),
            Turn.call("finish", {"summary": "slugify keeps digits now"}),
            Turn.call(
                "verdict",
                {"severity": "pass", "justification": "digits kept", "findings": []},
            ),
        )
        contract = repo.contract(
            "llm.yaml",
            f"""task: Make slugify keep digits.
coder: {{kind: llm, model: m, base_url: "{server.base_url}", max_turns: 8}}
validators:
  - {{id: tests, kind: command, run: "{CHECK_TESTS}"}}
  - {{id: review, kind: judge, model: m, base_url: "{server.base_url}",
      criteria: ["public API unchanged"]}}
land: merge
""",
        )
        # The key is exported, as an operator would: the coder and the judge read it there.
        done = repo.main(
            "run", "--contract", str(contract), "--json", OPENAI_API_KEY="local-test-key"
        )
        requests = list(server.requests)
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    jsonschema.validate(payload, SCHEMA)
    assert payload["status"] == "merged"
    assert {r["validator_id"] for r in payload["validator_results"]} >= {"tests", "review"}
    assert payload["coder_report"]["summary"] == "slugify keeps digits now"
    assert payload["coder_report"]["stop_reason"] == "completed"
    assert len(requests) == 5
    assert {r.headers.get("authorization") for r in requests} == {"Bearer local-test-key"}
    assert "slugify" in json.dumps(requests[-1].body)  # the judge saw the diff
    assert git(repo.root, "log", "-1", "--format=%s|%(trailers:key=Assay-Coder,valueonly)") == (
        "Make slugify keep digits.|llm (seat 1)"
    )


def test_an_llm_coder_without_its_key_is_refused_naming_the_variable(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    # ASSAY_* variables are never inherited by the test's `assay`, so this one is surely unset.
    contract = repo.contract(
        "nokey.yaml",
        """task: Make slugify keep digits.
coder: {kind: llm, model: m, base_url: "http://127.0.0.1:9/v1", api_key_env: ASSAY_TEST_NO_KEY}
validators: [{id: tests, kind: command, run: "true"}]
""",
    )
    done = repo.main("run", "--contract", str(contract), "--json")
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""  # refused before any run: no payload
    missing = "the llm coder reads its API key from $ASSAY_TEST_NO_KEY, which is not set"
    assert done.stderr.startswith(f"assay: coder llm: {missing}")
