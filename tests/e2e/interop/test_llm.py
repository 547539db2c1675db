"""assay's own `llm` coder and an LLM judge through `assay run`, against the same scripted server
the agent programs use (its Chat Completions dialect)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.agents import AgentRun, assert_merged
from support.model_server import ModelServer, Turn, Usage
from support.repo import PYTEST, make_repo

pytestmark = pytest.mark.interop
MODEL = "scripted-model"


def test_llm_coder_fixes_the_bug_and_an_llm_judge_passes_it(tmp_path: Path) -> None:
    verdict = {"severity": "pass", "justification": "Digits are kept.", "findings": []}
    with ModelServer() as server:
        server.script(
            Turn.call("read_file", {"path": "src/slug.py"}),
            Turn.call(
                "replace",
                {"path": "src/slug.py", "old": "isalpha", "new": "isalnum"},
                usage=Usage(400, 30),
            ),
            Turn.call("finish", {"summary": "slugify keeps digits now"}),
            Turn.call("verdict", verdict),  # the judge, after the tests passed
        )
        judge = {
            "id": "review",
            "kind": "judge",
            "model": MODEL,
            "base_url": server.base_url,
            "criteria": ["the public API is unchanged"],
        }
        run = AgentRun(
            make_repo(tmp_path),
            tmp_path / "home",
            {"kind": "llm", "model": MODEL, "base_url": server.base_url, "max_turns": 6},
            {"OPENAI_API_KEY": "sk-any"},
            validators=[{"id": "tests", "kind": "command", "run": PYTEST}, judge],
        )
        outcome = run.run()
    payload = outcome.payload
    results = {r["validator_id"]: r for r in payload["validator_results"]}
    assert results["review"]["severity"] == "pass" and results["review"]["error"] is False
    assert_merged(outcome, run.repo)
    assert payload["coder_report"]["summary"] == "slugify keeps digits now"
    # The coder's three turns and the judge's one, each journaled as it was answered.
    assert payload["usage"]["tokens"] == 120 + 430 + 120 + 120
    assert payload["usage"]["dispatches"] == 2 and payload["usage"]["cost_usd"] is None
    *coder, judged = server.completions
    assert [len(r.messages) for r in coder] == [2, 4, 6]
    assert judged.body["tool_choice"] == {"type": "function", "function": {"name": "verdict"}}
    assert "UNTRUSTED-DATA" in judged.raw.decode() and "+    return" in judged.raw.decode()
    assert judged.headers["authorization"] == "Bearer sk-any"
