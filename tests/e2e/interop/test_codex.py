"""The real Codex CLI (`codex exec --json`) through `assay run`, against the scripted Responses API.

The contract's ``base_url`` becomes a model provider of its own (codex 0.171 ignores
``OPENAI_BASE_URL``); its retries are turned off with ``-c`` options in ``args`` so a refused
request ends the run at once. Codex has no turn limit, so there is no turn-budget case.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.agents import (
    BUGGY_LINE,
    FIXED_LINE,
    AgentRun,
    assert_merged,
    assert_refunded_quota,
    require,
)
from support.brief_follower import (
    assert_halted,
    assert_verified_noop,
    claim_no_change,
    fire_halt,
    fixed_repo,
    head,
    request_text,
)
from support.model_server import ModelServer, Turn, Usage
from support.repo import Repo, make_repo

pytestmark = pytest.mark.interop
MODEL = "scripted-model"
NO_RETRIES = [
    "-c",
    "model_providers.assay.request_max_retries=0",
    "-c",
    "model_providers.assay.stream_max_retries=0",
]
PATCH = (
    "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: src/slug.py\n@@\n"
    f"-{BUGGY_LINE}+{FIXED_LINE}*** End Patch\nEOF\n"
)


@pytest.fixture
def server() -> Iterator[ModelServer]:
    require("codex")
    with ModelServer() as started:
        yield started


def codex_run(tmp_path: Path, server: ModelServer, repo: Repo | None = None) -> AgentRun:
    coder = {"kind": "codex", "model": MODEL, "base_url": server.base_url, "args": NO_RETRIES}
    repo = repo or make_repo(tmp_path)
    return AgentRun(repo, tmp_path / "home", coder, {"OPENAI_API_KEY": "sk-any"})


def shell(command: str) -> Turn:
    return Turn.call("exec_command", {"cmd": command})


def test_codex_fixes_the_bug_with_shell_and_apply_patch_and_reports_its_usage(
    tmp_path: Path, server: ModelServer
) -> None:
    server.script(
        Turn.call("exec_command", {"cmd": "cat src/slug.py"}),
        Turn.call("exec_command", {"cmd": PATCH}, usage=Usage(900, 60)),
        Turn.reply("Slugify now keeps digits.", usage=Usage(1000, 15)),
    )
    run = codex_run(tmp_path, server)
    outcome = run.run()
    assert_merged(outcome, run.repo)
    payload = outcome.payload
    assert payload["coder_report"]["summary"] == "Slugify now keeps digits."
    # Usage as codex's turn.completed event reported it; codex reports no cost: it stays unknown.
    assert payload["usage"]["tokens"] == 100 + 20 + 900 + 60 + 1000 + 15
    assert payload["usage"]["cost_usd"] is None
    assert payload["usage"]["unpriced_dispatches"] == 1
    requests = server.requests
    assert {(r.method, r.path) for r in requests} == {("POST", "/v1/responses")}  # no WebSocket
    first = requests[0]
    assert first.headers["authorization"] == "Bearer sk-any"
    assert first.body["model"] == MODEL and first.body["stream"] is True
    assert "exec_command" in {t.get("name") for t in first.body["tools"]}
    assert "Make slugify keep digits" in first.raw.decode()
    # What the shell and the patch returned to the model: the file, then the patch applied.
    assert "isalpha" in requests[1].raw.decode()
    events = run.seat_log(outcome, "codex.log")
    assert '"type":"file_change"' in events and "slug.py" in events


def test_codex_rate_limited_is_lost_to_quota_and_refunded(tmp_path: Path) -> None:
    require("codex")
    with ModelServer(when_exhausted=Turn.rate_limited(retry_after=30, reset="30s")) as server:
        outcome = codex_run(tmp_path, server).run()
    assert_refunded_quota(outcome)
    assert "429" in outcome.payload["reason"]
    assert len(server.completions) == 1


def test_codex_out_of_quota_is_a_usage_limit(tmp_path: Path, server: ModelServer) -> None:
    server.when_exhausted = Turn.usage_limited()
    outcome = codex_run(tmp_path, server).run()
    assert_refunded_quota(outcome)
    assert "Quota exceeded" in outcome.payload["reason"]


def test_codex_context_overflow_is_a_context_budget_stop(
    tmp_path: Path, server: ModelServer
) -> None:
    server.script(Turn.context_exceeded())
    outcome = codex_run(tmp_path, server).run()
    assert outcome.seat["stop_reason"] == "context_budget"
    assert "halt-budget-exhausted" in [h["name"] for h in outcome.payload["halts"]["warnings"]]


# The brief: the scripted model knows only what codex sent it -------------------------------

CONTRADICTION = "test_digits wants digits kept; the task text says drop them"
NO_CHANGE = "test_digits already passes at HEAD; slugify keeps digits (src/slug.py line 2)"


def test_codex_fires_the_halt_its_brief_names(tmp_path: Path, server: ModelServer) -> None:
    server.script(
        fire_halt("halt-spec-contradiction", CONTRADICTION, shell),
        Turn.reply("I fired halt-spec-contradiction and stopped."),
    )
    run = codex_run(tmp_path, server)
    base = head(run.repo)
    outcome = run.run()
    assert_halted(outcome, run.repo, "halt-spec-contradiction", base, CONTRADICTION)
    first = server.completions[0].raw.decode()
    # The brief came as codex's global instructions, the AGENTS.md of its private home.
    assert "# AGENTS.md instructions" in first and "The rules of this task (assay)" in first
    # What the fire command printed went back to the model: it ran in the seat, and succeeded.
    assert '"fired": true' in request_text(server.completions[1])


def test_codex_claims_a_verified_no_op_as_its_brief_says(
    tmp_path: Path, server: ModelServer
) -> None:
    server.script(claim_no_change(NO_CHANGE))
    run = codex_run(tmp_path, server, fixed_repo(tmp_path))
    base = head(run.repo)
    outcome = run.run()
    assert_verified_noop(outcome, run.repo, base, NO_CHANGE)
    assert outcome.payload["coder_report"]["summary"].startswith("NO CHANGE NEEDED: ")
