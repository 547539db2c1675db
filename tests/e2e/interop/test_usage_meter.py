"""The real agent programs, each dispatched with a meter against the scripted server: their
usage journaled call by call while they run, and a spent budget stopping them (by the host,
or by the program's own cap where it has one).

The model's answers come ``DELAY`` seconds apart, so the host's looks (every 50 ms, a file's
every 0.5 s) see each call apart.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.agents import AGENTS, require
from support.model_server import ModelServer, Turn, Usage

from assay.adapters.coders.aider import AiderCoder
from assay.adapters.coders.base import DispatchRequest
from assay.adapters.coders.claude import ClaudeCoder
from assay.adapters.coders.codex import CodexCoder
from assay.adapters.coders.mini import MiniCoder
from assay.core.vocab import StopReason

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support" / "standins"))

from coder_harness import BudgetMeter, make_request

pytestmark = pytest.mark.interop
DELAY = 1.0
PRICES = {"input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05}


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as started:
        yield started


def dispatch_request(
    tmp_path: Path, meter: BudgetMeter, settings: dict[str, object], env: dict[str, str]
) -> DispatchRequest:
    path = f"{AGENTS / 'bin'}{os.pathsep}{os.environ['PATH']}"
    request = make_request(tmp_path, settings=settings, path=path, env=env, timeout=120)
    home = tmp_path / "seat.home"  # a private home, as the engine gives every seat
    home.mkdir()
    return dataclasses.replace(request, meter=meter, home=home)


def slow(turn: Turn) -> Turn:
    return dataclasses.replace(turn, delay_seconds=DELAY)


def claude_env(server: ModelServer) -> dict[str, str]:
    return {
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": "sk-ant-any",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
    }


def listing(usage: Usage) -> Turn:
    return slow(Turn.call("Bash", {"command": "ls", "description": "List"}, usage=usage))


def test_claude_is_stopped_by_the_host_once_its_calls_spend_the_tokens(
    tmp_path: Path, server: ModelServer
) -> None:
    require("claude")
    server.script(*[listing(Usage(1200, 50)) for _ in range(6)])
    meter = BudgetMeter(max_tokens=2500)
    settings = {"model": "claude-sonnet-4-5"}
    result = ClaudeCoder().dispatch(dispatch_request(tmp_path, meter, settings, claude_env(server)))
    # Spent by the second call's output: its start (2400 in, 1 out) left the budget unspent.
    assert result.stopped == "the run spent 2500 tokens of its 2500-token budget"
    assert result.exit_code is None and result.error == f"stopped by assay: {result.stopped}"
    # Each call journaled as it came: its input as it started, its output once it ended (its
    # partial messages), each call's end seen before the next call was answered.
    reports = [(r.tokens_in, r.tokens_out, r.calls) for r in meter.reports]
    assert set(reports) <= {(1200, 1, 1), (1200, 50, 1), (2400, 51, 2), (2400, 100, 2)}
    assert (1200, 50, 1) in reports and reports[-1] == (2400, 100, 2)
    assert result.usage is not None and result.usage.tokens == 2500
    # Stopped while its third call waited for an answer, if it had asked already.
    assert len(server.completions) in (2, 3)


def test_claude_stops_itself_at_the_budget_it_was_given(
    tmp_path: Path, server: ModelServer
) -> None:
    require("claude")
    server.script(*[listing(Usage(1200, 50)) for _ in range(6)])
    meter = BudgetMeter(remaining_cost_usd=0.005)
    settings = {"model": "claude-sonnet-4-5"}
    result = ClaudeCoder().dispatch(dispatch_request(tmp_path, meter, settings, claude_env(server)))
    assert result.stop_reason is StopReason.TURN_BUDGET and result.stopped is None
    assert result.error == "claude stopped at its --max-budget-usd limit"
    assert len(server.completions) == 2  # its second call passed $0.005
    assert result.usage is not None
    assert (result.usage.tokens_in, result.usage.tokens_out) == (2400, 100)
    assert result.usage.cost_usd == pytest.approx(2 * (1200 * 3e-06 + 50 * 1.5e-05))
    assert meter.reports[-1] == result.usage


def test_codex_calls_are_journaled_before_its_turn_ends(
    tmp_path: Path, server: ModelServer
) -> None:
    require("codex")
    server.script(
        slow(Turn.call("exec_command", {"cmd": "ls"}, usage=Usage(1200, 50))),
        slow(Turn.call("exec_command", {"cmd": "ls"}, usage=Usage(1500, 60))),
        slow(Turn.reply("Done.", usage=Usage(2000, 30))),
    )
    meter = BudgetMeter()
    settings = {"model": "scripted-model", "base_url": server.base_url}
    request = dispatch_request(tmp_path, meter, settings, {"OPENAI_API_KEY": "sk-any"})
    result = CodexCoder().dispatch(request)
    assert result.stop_reason is StopReason.COMPLETED, result
    # From its session file, call by call; its stdout says the total only at the end.
    assert [(r.tokens_in, r.calls) for r in meter.reports[:2]] == [(1200, 1), (2700, 2)]
    assert result.usage is not None
    assert (result.usage.tokens_in, result.usage.tokens_out, result.usage.calls) == (4700, 140, 3)
    assert result.usage.model == "scripted-model" and result.usage.cost_usd is None


def test_aider_each_reply_is_journaled_with_its_cost(tmp_path: Path, server: ModelServer) -> None:
    require("aider")
    server.script(
        slow(Turn.reply("I need to see app.py to answer.", usage=Usage(1200, 50))),
        slow(Turn.reply("Nothing to change.", usage=Usage(2500, 1200))),
    )
    metadata = tmp_path / "prices.json"
    info = {"max_input_tokens": 128000, "litellm_provider": "openai", "mode": "chat", **PRICES}
    metadata.write_text(json.dumps({"openai/scripted-model": info}))
    settings = {
        "model": "openai/scripted-model",
        "base_url": server.base_url,
        "args": ["--model-metadata-file", str(metadata)],
    }
    meter = BudgetMeter()
    request = dispatch_request(tmp_path, meter, settings, {"OPENAI_API_KEY": "sk-any"})
    result = AiderCoder().dispatch(request)
    assert result.stop_reason is StopReason.COMPLETED, result
    assert [(r.tokens_in, r.tokens_out, r.cost_usd) for r in meter.reports] == [
        (1200, 50, 0.0043),
        (3700, 1250, 0.03),  # aider's session cost, as it rounds it
    ]
    assert result.usage == meter.reports[-1] and result.usage.model == "openai/scripted-model"


def test_mini_stops_itself_at_the_budget_it_was_given(tmp_path: Path, server: ModelServer) -> None:
    require("mini")
    server.script(
        *[
            slow(Turn.call("bash", {"command": "ls"}, text="Next.", usage=Usage(900, 30)))
            for _ in range(4)
        ]
    )
    registry = tmp_path / "model-registry.json"
    info = {"max_input_tokens": 128000, "litellm_provider": "openai", "mode": "chat", **PRICES}
    registry.write_text(json.dumps({"openai/scripted-model": info}))
    env = {
        "OPENAI_API_KEY": "sk-any",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_MODEL_REGISTRY_PATH": str(registry),
        "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1",
    }
    settings = {"model": "openai/scripted-model", "base_url": server.base_url}
    meter = BudgetMeter(remaining_cost_usd=0.005)  # a call costs $0.00315
    result = MiniCoder().dispatch(dispatch_request(tmp_path, meter, settings, env))
    assert result.stop_reason is StopReason.TURN_BUDGET, result
    assert len(server.completions) == 2
    assert [(r.tokens_in, r.calls) for r in meter.reports] == [(900, 1), (1800, 2)]
    assert meter.reports[0].cost_usd == pytest.approx(0.00315)
    assert result.usage == meter.reports[-1]
