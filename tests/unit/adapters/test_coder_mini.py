"""The mini-swe-agent adapter: its trajectory reader on captured shapes, and the adapter end to
end against the stand-in ``mini`` in a real git worktree."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.adapters.coders.agentcli import ParsedRun, to_result
from assay.adapters.coders.mini import MiniCoder, brief_template, parse_mini_run
from assay.adapters.process import ProcessResult
from assay.core.vocab import StopReason

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support" / "standins"))

from coder_harness import changed, make_request, recorded

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def trajectory(status: str | None, *, calls: int = 2, cost: float = 0.05, **exit_extra: Any) -> str:
    usage = {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "x", "extra": {"response": {"usage": usage}}},
        {
            "role": "assistant",
            "content": "y",
            "extra": {"response": {"usage": {"prompt_tokens": 2000, "completion_tokens": 10}}},
        },
    ]
    info: dict[str, Any] = {"model_stats": {"instance_cost": cost, "api_calls": calls}}
    if status is not None:
        info |= {"exit_status": status, "submission": exit_extra.pop("submission", "")}
        messages.append(
            {"role": "exit", "content": "", "extra": {"exit_status": status, **exit_extra}}
        )
    return json.dumps(
        {"info": info, "messages": messages, "trajectory_format": "mini-swe-agent-1.1"}
    )


def test_submitted_is_completed_with_stats() -> None:
    parsed = parse_mini_run(trajectory("Submitted", submission="All done."))
    assert parsed.stop_reason is StopReason.COMPLETED
    assert (parsed.turns_used, parsed.cost_usd, parsed.tokens_used) == (2, 0.05, 1050 + 2010)
    assert parsed.summary == "All done."


@pytest.mark.parametrize("status", ["LimitsExceeded", "TimeExceeded"])
def test_limits_are_turn_budget(status: str) -> None:
    assert parse_mini_run(trajectory(status)).stop_reason is StopReason.TURN_BUDGET


def test_old_interactive_agent_dying_on_the_limit_prompt_is_turn_budget() -> None:
    out = (
        "Limits exceeded. Limits: 3 steps, $3.0.\nCurrent spend: 3 steps, $0.05.\nNew step limit: "
    )
    parsed = parse_mini_run(trajectory("EOFError"), stdout=out, exit_code=1)
    assert parsed.stop_reason is StopReason.TURN_BUDGET


def test_rate_limit_exception_is_quota_with_reset() -> None:
    text = "litellm.RateLimitError: OpenAIException - Rate limit reached. Please try again in 7s."
    parsed = parse_mini_run(trajectory("RateLimitError", exception_str=text), exit_code=1, now=NOW)
    assert parsed.stop_reason is StopReason.PROVIDER_FAULT
    assert parsed.quota is not None and parsed.quota.kind == "rate_limit"
    assert parsed.quota.reset_at == NOW + timedelta(seconds=7)


@pytest.mark.parametrize(
    ("status", "stop"),
    [
        ("ContextWindowExceededError", StopReason.CONTEXT_BUDGET),
        ("ContextWindowExceeded", StopReason.CONTEXT_BUDGET),
        ("InternalServerError", StopReason.PROVIDER_FAULT),
        ("APIConnectionError", StopReason.PROVIDER_FAULT),
        ("ValueError", None),
    ],
)
def test_exit_statuses_map_to_stop_reasons(status: str, stop: StopReason | None) -> None:
    parsed = parse_mini_run(trajectory(status, exception_str="boom"), exit_code=1)
    assert parsed.stop_reason is stop and parsed.error


def test_no_trajectory_is_read_from_stderr() -> None:
    parsed = parse_mini_run(None, stderr="Traceback ...\nValueError: bad", exit_code=1)
    assert parsed.stop_reason is None and parsed.error is not None and "ValueError" in parsed.error


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
DOC = st.fixed_dictionaries(
    {},
    optional={
        "info": st.fixed_dictionaries(
            {},
            optional={
                "exit_status": st.sampled_from(["Submitted", "LimitsExceeded", "RateLimitError"])
                | JSONISH,
                "submission": JSONISH,
                "model_stats": st.dictionaries(
                    st.sampled_from(["instance_cost", "api_calls"]), JSONISH
                ),
            },
        ),
        "messages": st.lists(
            st.fixed_dictionaries(
                {}, optional={"role": JSONISH, "content": JSONISH, "extra": JSONISH}
            ),
            max_size=4,
        ),
    },
).map(json.dumps)


@settings(max_examples=80, deadline=None)
@given(DOC | st.text(max_size=80) | st.none(), st.text(max_size=40), st.integers(-2, 3) | st.none())
def test_parser_never_raises(doc: str | None, out: str, code: int | None) -> None:
    parsed = parse_mini_run(doc, stdout=out, stderr=out, exit_code=code, now=NOW)
    assert isinstance(parsed, ParsedRun)
    to_result("mini", ProcessResult(code, "", "", False, 5, Path("log")), parsed)


# The adapter against the stand-in ---------------------------------------------------------


def test_edit_completes_with_usage_cost_and_turns(tmp_path: Path) -> None:
    request = make_request(tmp_path, settings={"model": "openai/gpt-4o"}, max_turns=9)
    result = MiniCoder().dispatch(request)
    assert result.stop_reason is StopReason.COMPLETED, result
    assert (result.turns_used, result.cost_usd) == (2, 0.0421)
    assert result.tokens_used == (1600 + 60) + (1700 + 60)
    assert result.report is not None and result.report.summary == "Wrote standin.txt."
    assert changed(request.worktree) == ["standin.txt"]
    seen = recorded(tmp_path)
    assert seen["argv"] == [
        "-y",
        "--exit-immediately",
        "-o",
        str(request.output_dir / "mini.traj.json"),  # mini writes it: the output folder
        "-c",
        "mini.yaml",
        "-c",
        "agent.step_limit=9",
        "-m",
        "openai/gpt-4o",
        "-t",
        request.prompt,
    ]
    # Read from there safely, and kept in the engine's log folder.
    kept = json.loads((request.log_dir / "mini.traj.json").read_text())
    assert kept["info"]["exit_status"] == "Submitted"
    assert seen["env"]["MSWEA_CONFIGURED"] == "true"
    assert seen["env"]["ASSAY_DISPATCH_ID"] == "d-1"


def test_max_turns_is_turn_budget(tmp_path: Path) -> None:
    result = MiniCoder().dispatch(make_request(tmp_path, scenario="max_turns", max_turns=3))
    assert result.stop_reason is StopReason.TURN_BUDGET and result.turns_used == 3


def test_rate_limit_is_provider_fault_with_reset(tmp_path: Path) -> None:
    before = datetime.now(UTC)
    result = MiniCoder().dispatch(make_request(tmp_path, scenario="rate_limit"))
    assert result.stop_reason is StopReason.PROVIDER_FAULT and result.exit_code == 1
    assert result.quota is not None and result.quota.kind == "rate_limit"
    assert result.quota.reset_at is not None
    assert before + timedelta(seconds=6) < result.quota.reset_at < before + timedelta(seconds=60)


@pytest.mark.parametrize(
    ("scenario", "stop", "quota"),
    [
        ("usage_limit", StopReason.PROVIDER_FAULT, "usage_limit"),
        ("context", StopReason.CONTEXT_BUDGET, None),
        ("server_error", StopReason.PROVIDER_FAULT, None),
    ],
)
def test_faults(tmp_path: Path, scenario: str, stop: StopReason, quota: str | None) -> None:
    result = MiniCoder().dispatch(make_request(tmp_path, scenario=scenario))
    assert result.stop_reason is stop and result.error
    assert (result.quota.kind if result.quota else None) == quota


def test_rejected_key_is_the_operators_setting(tmp_path: Path) -> None:
    result = MiniCoder().dispatch(make_request(tmp_path, scenario="auth"))
    assert result.environment_error is None
    assert result.setting_error is not None and "Incorrect API key" in result.setting_error


def test_crash_sets_error(tmp_path: Path) -> None:
    result = MiniCoder().dispatch(make_request(tmp_path, scenario="crash"))
    assert result.stop_reason is None and result.exit_code == 1
    assert result.error is not None and "ValueError" in result.error


def test_missing_binary_is_the_operators_setting_with_install_hint(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    result = MiniCoder().dispatch(make_request(tmp_path, path=str(empty)))
    assert result.environment_error is None and result.setting_error == (
        "mini not found on PATH: install it with `pip install mini-swe-agent`"
    )


def test_timeout_keeps_what_the_trajectory_says_so_far(tmp_path: Path) -> None:
    result = MiniCoder().dispatch(make_request(tmp_path, scenario="sleep", timeout=0.5))
    assert result.timed_out and result.exit_code is None and result.wall_time_ms < 5000
    assert result.turns_used == 1 and result.cost_usd == 0.01


def test_stale_trajectory_is_not_read_again(tmp_path: Path) -> None:
    MiniCoder().dispatch(make_request(tmp_path))
    result = MiniCoder().dispatch(make_request(tmp_path, scenario="crash"))
    assert result.stop_reason is None and result.turns_used is None


def test_a_server_error_loses_the_seat_to_a_provider_fault(tmp_path: Path) -> None:
    result = MiniCoder().dispatch(make_request(tmp_path, scenario="server_error"))
    assert result.fault is not None and result.fault.detail.startswith("mini: ")
    for scenario in ("context", "usage_limit", "auth"):
        assert MiniCoder().dispatch(make_request(tmp_path, scenario=scenario)).fault is None


# The brief and the final answer -----------------------------------------------------------

BRIEF = '# The rules\nA {{ brace }} and {% raw %} stay text; fire with "$ASSAY_DISPATCH_ID".\n'


def test_the_final_answer_is_the_submission_else_the_last_model_message() -> None:
    assert parse_mini_run(trajectory("Submitted", submission=" Done.\n")).summary == "Done."
    # A bare submit command prints nothing more: the text of the message that submitted.
    assert parse_mini_run(trajectory("Submitted")).summary == "y"
    doc = json.loads(trajectory("Submitted"))
    doc["messages"][3]["content"] = [{"type": "text", "text": "NO CHANGE NEEDED: x"}]
    assert parse_mini_run(json.dumps(doc)).summary == "NO CHANGE NEEDED: x"


def test_the_brief_is_appended_to_the_system_template_as_a_jinja_literal(tmp_path: Path) -> None:
    request = replace(make_request(tmp_path), brief=BRIEF)
    result = MiniCoder().dispatch(request)
    assert result.stop_reason is StopReason.COMPLETED, result
    argv = recorded(tmp_path)["argv"]
    config = request.log_dir / "mini.brief.yaml"
    assert argv[4:8] == ["-c", "mini.yaml", "-c", str(config)]  # after mini's own config
    template = json.loads(config.read_text())["agent"]["system_template"]
    assert template == brief_template(BRIEF)
    assert template.startswith("You are a helpful assistant that can interact with a computer.")
    # Jinja reads one string literal: its text is the brief, braces and all.
    literal = template.split("\n\n", 1)[1].strip()
    assert literal.startswith("{{ ") and literal.endswith(" }}")
    assert json.loads(literal[3:-3]) == BRIEF
    assert changed(request.worktree) == ["standin.txt"]


def test_no_brief_no_brief_config(tmp_path: Path) -> None:
    request = make_request(tmp_path)
    MiniCoder().dispatch(replace(request, brief=BRIEF))
    MiniCoder().dispatch(request)
    assert str(request.log_dir / "mini.brief.yaml") not in recorded(tmp_path)["argv"]
    assert not (request.log_dir / "mini.brief.yaml").exists()


def test_an_unpriced_model_is_an_unknown_cost_never_zero() -> None:
    # mini adds 0.0 for every call litellm could not price (MSWEA_COST_TRACKING=ignore_errors).
    parsed = parse_mini_run(trajectory("Submitted", cost=0.0, submission="Done."))
    assert parsed.cost_usd is None
    assert parsed.tokens_used == 1050 + 2010  # the tokens are still known
