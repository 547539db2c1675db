"""The real mini-swe-agent (`mini -y --exit-immediately`) through `assay run`, against scripted
Chat Completions.

mini's model calls its one ``bash`` tool; the run ends when a command prints
``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``. A litellm model registry prices the scripted model
(``LITELLM_MODEL_REGISTRY_PATH``), so mini's trajectory carries a cost, and
``MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT=1`` stops its retries (by default ten, four to sixty
seconds apart).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.agents import (
    AgentRun,
    assert_merged,
    assert_refunded_quota,
    assert_turn_budget,
    require,
)
from support.brief_follower import (
    NOT_BRIEFED,
    assert_halted,
    assert_verified_noop,
    fire_halt,
    fixed_repo,
    head,
    no_change_mark,
)
from support.model_server import ModelServer, RecordedRequest, Turn, Usage
from support.repo import Repo, make_repo

pytestmark = pytest.mark.interop
MODEL = "openai/scripted-model"
PRICES = {"input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05}
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


@pytest.fixture
def server() -> Iterator[ModelServer]:
    require("mini")
    with ModelServer() as started:
        yield started


def mini_run(
    tmp_path: Path, server: ModelServer, repo: Repo | None = None, **coder: object
) -> AgentRun:
    registry = tmp_path / "model-registry.json"
    info = {"max_input_tokens": 128000, "litellm_provider": "openai", "mode": "chat", **PRICES}
    registry.write_text(json.dumps({MODEL: info}))
    env = {
        "OPENAI_API_KEY": "sk-any",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_MODEL_REGISTRY_PATH": str(registry),
        "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1",
    }
    settings = {"kind": "mini", "model": MODEL, "base_url": server.base_url, **coder}
    return AgentRun(repo or make_repo(tmp_path), tmp_path / "home", settings, env)


def bash(command: str, usage: Usage | None = None) -> Turn:
    return Turn.call("bash", {"command": command}, text="Next step.", usage=usage)


def test_mini_fixes_the_bug_with_bash_and_reports_usage_and_cost(
    tmp_path: Path, server: ModelServer
) -> None:
    server.script(
        bash("sed -i 's/isalpha/isalnum/' src/slug.py", Usage(900, 30)),
        bash(SUBMIT, Usage(1000, 10)),
    )
    run = mini_run(tmp_path, server, max_turns=10)
    outcome = run.run()
    assert_merged(outcome, run.repo)
    payload = outcome.payload
    # Usage and cost as mini's own trajectory recorded them.
    assert payload["usage"]["tokens"] == 930 + 1010
    cost = 1900 * PRICES["input_cost_per_token"] + 40 * PRICES["output_cost_per_token"]
    assert payload["usage"]["cost_usd"] == pytest.approx(cost)
    first, second = server.completions
    assert first.body["model"] == "scripted-model"
    assert [t["function"]["name"] for t in first.body["tools"]] == ["bash"]
    assert "Make slugify keep digits" in first.raw.decode()
    tool = second.messages[-1]  # what mini's bash tool returned to the model
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_1_0"
    assert "returncode" in str(tool["content"])
    trajectory = json.loads(run.seat_log(outcome, "mini.traj.json"))
    assert trajectory["info"]["exit_status"] == "Submitted"


def test_mini_stopped_by_its_step_limit_is_a_turn_budget_stop(
    tmp_path: Path, server: ModelServer
) -> None:
    server.script(*[bash("ls src")] * 5)
    outcome = mini_run(tmp_path, server, max_turns=2).run()
    assert_turn_budget(outcome)
    assert len(server.completions) == 2
    assert "slug.py" in str(server.completions[-1].messages[-1]["content"])  # ls really ran


def test_mini_rate_limited_is_lost_to_quota_and_refunded(tmp_path: Path) -> None:
    require("mini")
    with ModelServer(when_exhausted=Turn.rate_limited(retry_after=0.01)) as server:
        outcome = mini_run(tmp_path, server).run()
    assert_refunded_quota(outcome)
    assert "RateLimitError" in outcome.payload["reason"]


# The brief: the scripted model knows only what mini sent it -------------------------------

CONTRADICTION = "test_digits wants digits kept; the task text says drop them"
NO_CHANGE = "test_digits already passes at HEAD; slugify keeps digits (src/slug.py line 2)"


def test_mini_fires_the_halt_its_brief_names(tmp_path: Path, server: ModelServer) -> None:
    server.script(fire_halt("halt-spec-contradiction", CONTRADICTION, bash), bash(SUBMIT))
    run = mini_run(tmp_path, server, max_turns=10)
    base = head(run.repo)
    outcome = run.run()
    assert_halted(outcome, run.repo, "halt-spec-contradiction", base, CONTRADICTION)
    first = server.completions[0]
    # The brief is in mini's system message, after mini's own system template.
    system = first.messages[0]
    assert system["role"] == "system"
    assert "The rules of this task (assay)" in str(system["content"])
    tool = server.completions[1].messages[-1]  # what the fire command printed: it really ran
    assert tool["role"] == "tool" and "FIRED" in str(tool["content"])


def submit_no_change(request: RecordedRequest) -> Turn:
    """The brief's no-op claim as the text of the message that submits."""
    mark = no_change_mark(request)
    text = f"{mark} {NO_CHANGE}" if mark else NOT_BRIEFED
    return Turn.call("bash", {"command": SUBMIT}, text=text)


def test_mini_claims_a_verified_no_op_as_its_brief_says(
    tmp_path: Path, server: ModelServer
) -> None:
    server.script(submit_no_change)
    run = mini_run(tmp_path, server, fixed_repo(tmp_path / "fixed"), max_turns=10)
    base = head(run.repo)
    outcome = run.run()
    assert_verified_noop(outcome, run.repo, base, NO_CHANGE)
    assert outcome.payload["coder_report"]["summary"] == f"NO CHANGE NEEDED: {NO_CHANGE}"
