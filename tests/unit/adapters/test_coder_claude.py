"""The claude adapter: its stream-json parser on captured lines, and the adapter end to end
against the stand-in ``claude`` in a real git worktree."""

from __future__ import annotations

import dataclasses
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.adapters.coders.agentcli import ParsedRun, to_result
from assay.adapters.coders.base import DispatchRequest
from assay.adapters.coders.claude import ClaudeCoder, parse_claude_stream
from assay.adapters.process import MAX_OUTPUT_READ, ProcessResult
from assay.core.brief import query_command
from assay.core.halt_skill import SKILL_NAME
from assay.core.vocab import StopReason

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support" / "standins"))

from coder_harness import BudgetMeter, changed, recorded
from coder_harness import make_request as harness_request

KEY = {"ANTHROPIC_API_KEY": "standin-key"}


def make_request(tmp_path: Path, **given: Any) -> DispatchRequest:
    """A dispatch of the stand-in claude with a key in its environment (claude is never
    started without one)."""
    return harness_request(tmp_path, **{**given, "env": {**KEY, **(given.get("env") or {})}})


NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
RESET = 1_900_000_020  # a whole minute, so every format of it round-trips

# Captured from a 2.1.83 run (anthropics/claude-code#38673), trimmed.
SUCCESS = "\n".join(
    [
        '{"type":"system","subtype":"init","cwd":"/home/user/p","session_id":"S","tools":["Bash"],'
        '"mcp_servers":[],"model":"claude-opus-4-6","permissionMode":"default",'
        '"apiKeySource":"none","claude_code_version":"2.1.83"}',
        '{"type":"assistant","message":{"model":"claude-opus-4-6","id":"m1","type":"message",'
        '"role":"assistant","content":[{"type":"text","text":"\\n\\nHello."}],"stop_reason":null,'
        '"usage":{"input_tokens":3,"cache_creation_input_tokens":2783,'
        '"cache_read_input_tokens":14707,"output_tokens":2}}}',
        '{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1774447200,'
        '"rateLimitType":"five_hour","overageStatus":"rejected","isUsingOverage":false}}',
        '{"type":"result","subtype":"success","is_error":false,"duration_ms":4086,"num_turns":1,'
        '"result":"Hello.","stop_reason":"end_turn","total_cost_usd":0.024,'
        '"usage":{"input_tokens":3,"output_tokens":6}}',
    ]
)


def result_line(**fields: object) -> str:
    return json.dumps({"type": "result", "session_id": "S", **fields})


def test_success_reads_turns_cost_and_usage() -> None:
    parsed = parse_claude_stream(SUCCESS, now=NOW)
    assert parsed.stop_reason is StopReason.COMPLETED
    # The trimmed result's usage leaves out the cached input the message reported: each count
    # is the larger of the two (a result can leave a call out, see REAL_BUDGET_STOP).
    assert (parsed.turns_used, parsed.cost_usd, parsed.tokens_used) == (1, 0.024, 17499)
    assert parsed.usage is not None
    assert (parsed.usage.tokens_in, parsed.usage.tokens_out) == (3 + 2783 + 14707, 6)
    assert parsed.summary == "Hello."
    assert parsed.quota is None and parsed.error is None


def test_max_turns_is_turn_budget() -> None:
    line = result_line(subtype="error_max_turns", is_error=False, num_turns=11, total_cost_usd=1)
    parsed = parse_claude_stream(line, exit_code=1)
    assert parsed.stop_reason is StopReason.TURN_BUDGET
    assert parsed.turns_used == 11


def test_usage_limit_epoch_is_quota_with_reset() -> None:
    text = "Claude AI usage limit reached|1755615600"
    parsed = parse_claude_stream(
        result_line(subtype="success", is_error=True, result=text), now=NOW
    )
    assert parsed.stop_reason is StopReason.PROVIDER_FAULT
    assert parsed.quota is not None and parsed.quota.kind == "usage_limit"
    assert parsed.quota.reset_at == datetime.fromtimestamp(1755615600, UTC)


def test_rate_limit_takes_reset_from_rate_limit_event() -> None:
    text = 'API Error: 429 {"type":"error","error":{"type":"rate_limit_error"}}'
    stream = "\n".join(
        [
            json.dumps(
                {
                    "type": "rate_limit_event",
                    "rate_limit_info": {"status": "rejected", "resetsAt": RESET},
                }
            ),
            result_line(subtype="success", is_error=True, result=text),
        ]
    )
    parsed = parse_claude_stream(stream, now=NOW)
    assert parsed.quota is not None and parsed.quota.kind == "rate_limit"
    assert parsed.quota.reset_at == datetime.fromtimestamp(RESET, UTC)


def test_dated_usage_limit_and_clock_reset() -> None:
    text = (
        "You have reached your specified API usage limits. "
        "You will regain access on 2026-04-01 at 00:00 UTC."
    )
    parsed = parse_claude_stream(result_line(subtype="success", is_error=True, result=text))
    assert parsed.quota is not None and parsed.quota.reset_at == datetime(2026, 4, 1, tzinfo=UTC)
    text = "You've hit your limit · resets 5pm (Europe/Warsaw)"
    parsed = parse_claude_stream(
        result_line(subtype="success", is_error=True, result=text), now=NOW
    )
    assert parsed.quota is not None and parsed.quota.reset_at == datetime(
        2026, 3, 1, 16, tzinfo=UTC
    )


@pytest.mark.parametrize(
    ("text", "stop"),
    [
        ("Prompt is too long", StopReason.CONTEXT_BUDGET),
        (
            'API Error: 529 {"type":"error","error":{"type":"overloaded_error"}}',
            StopReason.PROVIDER_FAULT,
        ),
        ("API Error: 500 Internal server error", StopReason.PROVIDER_FAULT),
    ],
)
def test_error_results_map_to_stop_reasons(text: str, stop: StopReason) -> None:
    parsed = parse_claude_stream(result_line(subtype="success", is_error=True, result=text))
    assert parsed.stop_reason is stop
    assert parsed.quota is None
    assert parsed.error


# Captured from the real claude 2.1.332 against the scripted server (tests/interop), trimmed.
REAL_MAX_TURNS = result_line(
    subtype="error_max_turns",
    is_error=True,
    num_turns=3,
    total_cost_usd=0.0016,
    terminal_reason="max_turns",
    errors=["Reached maximum number of turns (2)"],
    usage={"input_tokens": 200, "cache_read_input_tokens": 0, "output_tokens": 40},
)
REAL_RATE_LIMIT = "\n".join(
    [
        json.dumps(
            {
                "type": "assistant",
                "message": {
                    "id": "78f75d93",
                    "model": "<synthetic>",
                    "role": "assistant",
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                    "content": [
                        {
                            "type": "text",
                            "text": "API Error: Request rejected (429) \u00b7 Rate limit reached "
                            "for requests. Please try again later.",
                        }
                    ],
                },
                "error": "rate_limit",
                "is_api_error_message": True,
                "api_error_status": 429,
                "api_error_type": "rate_limit_error",
            }
        ),
        result_line(
            subtype="success",
            is_error=True,
            num_turns=1,
            total_cost_usd=0,
            terminal_reason="api_error",
            api_error_status=429,
            api_error_type="rate_limit_error",
            result="API Error: Request rejected (429) \u00b7 Rate limit reached for requests.",
        ),
    ]
)


def test_real_max_turns_result() -> None:
    parsed = parse_claude_stream(REAL_MAX_TURNS, exit_code=1)
    assert parsed.stop_reason is StopReason.TURN_BUDGET
    assert (parsed.turns_used, parsed.tokens_used, parsed.cost_usd) == (3, 240, 0.0016)


def test_real_rate_limit_result_is_a_quota_signal() -> None:
    parsed = parse_claude_stream(REAL_RATE_LIMIT, exit_code=1, now=NOW)
    assert parsed.stop_reason is StopReason.PROVIDER_FAULT
    assert parsed.quota is not None and parsed.quota.kind == "rate_limit"


@pytest.mark.parametrize(
    ("fields", "stop", "quota"),
    [
        # The structured fields decide even when the words change.
        ({"terminal_reason": "max_turns"}, StopReason.TURN_BUDGET, False),
        (
            {"terminal_reason": "prompt_too_long", "result": "Too big."},
            StopReason.CONTEXT_BUDGET,
            False,
        ),
        (
            {"api_error_type": "overloaded_error", "result": "API Error"},
            StopReason.PROVIDER_FAULT,
            False,
        ),
        (
            {"api_error_type": "rate_limit_error", "result": "Rejected"},
            StopReason.PROVIDER_FAULT,
            True,
        ),
    ],
)
def test_structured_result_fields(fields: dict[str, object], stop: StopReason, quota: bool) -> None:
    line = result_line(subtype="success", is_error=True, num_turns=1, **fields)
    parsed = parse_claude_stream(line, exit_code=1, now=NOW)
    assert parsed.stop_reason is stop and (parsed.quota is not None) is quota


def test_no_result_event_is_a_crash_with_partial_usage() -> None:
    stream = SUCCESS.splitlines()[1] + "\nnot json at all\n{broken"
    parsed = parse_claude_stream(stream, stderr="TypeError: boom", exit_code=1)
    assert parsed.stop_reason is None
    assert parsed.error is not None and "exited with code 1" in parsed.error
    assert parsed.tokens_used == 3 + 2783 + 14707 + 2


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
EVENT = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["assistant", "result", "rate_limit_event", "user", "system", "stream_event"]
        )
    },
    optional={
        "subtype": st.sampled_from(["success", "error_max_turns", "error_during_execution"])
        | st.text(max_size=5),
        "is_error": JSONISH,
        "num_turns": JSONISH,
        "total_cost_usd": JSONISH,
        "usage": JSONISH,
        "result": JSONISH,
        "message": JSONISH,
        "rate_limit_info": st.dictionaries(st.sampled_from(["status", "resetsAt"]), JSONISH),
        "errors": JSONISH,
        "api_error_status": JSONISH,
        "event": st.fixed_dictionaries(
            {"type": st.sampled_from(["message_start", "message_delta", "content_block_delta"])},
            optional={"message": JSONISH, "usage": JSONISH, "delta": JSONISH},
        ),
        "api_message_id": JSONISH,
        "session_id": JSONISH,
        "parent_tool_use_id": JSONISH,
    },
).map(json.dumps)


@settings(max_examples=80, deadline=None)
@given(st.lists(EVENT | st.text(max_size=40), max_size=8), st.integers(-2, 3) | st.none())
def test_parser_never_raises(lines: list[str], code: int | None) -> None:
    parsed = parse_claude_stream("\n".join(lines), stderr="x", exit_code=code, now=NOW)
    assert isinstance(parsed, ParsedRun)
    proc = ProcessResult(code, "", "", code is None, 5, Path("log"))
    to_result("claude", proc, parsed)  # the report validates whatever was parsed


# The adapter against the stand-in ---------------------------------------------------------


def test_edit_completes_with_usage_cost_and_turns(tmp_path: Path) -> None:
    request = make_request(tmp_path, settings={"model": "claude-opus-4-1"}, max_turns=7)
    result = ClaudeCoder().dispatch(request)
    assert result.stop_reason is StopReason.COMPLETED, result
    assert (result.turns_used, result.cost_usd, result.tokens_used) == (3, 0.0123, 13262)
    assert result.exit_code == 0 and not result.timed_out and result.error is None
    assert result.report is not None and result.report.turns_available == 7
    assert result.report.summary == "I wrote standin.txt."
    assert changed(request.worktree) == ["standin.txt"]
    seen = recorded(tmp_path)
    assert seen["argv"] == [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
        "--max-turns",
        "7",
        "--model",
        "claude-opus-4-1",
        "--dangerously-skip-permissions",
    ]
    assert seen["stdin"] == request.prompt
    assert Path(seen["cwd"]) == request.worktree
    assert seen["env"]["ASSAY_DISPATCH_ID"] == "d-1"
    assert seen["env"]["ASSAY_REPORT_PATH"] == str(request.report_path)
    assert result.log_path is not None and result.log_path.exists()


def test_own_permission_flag_and_base_url_are_passed(tmp_path: Path) -> None:
    settings_ = {"args": ["--permission-mode", "plan"], "base_url": "http://127.0.0.1:9"}
    ClaudeCoder().dispatch(make_request(tmp_path, settings=settings_))
    seen = recorded(tmp_path)
    assert "--dangerously-skip-permissions" not in seen["argv"]
    assert seen["argv"][-2:] == ["--permission-mode", "plan"]
    assert "IS_SANDBOX" not in seen["env"]  # only needed to skip permissions as root
    assert seen["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"


def test_the_brief_is_appended_and_permissions_skipped_inside_the_sandbox(
    tmp_path: Path,
) -> None:
    brief = '# The rules\n\nassay halt check --dispatch-id "$ASSAY_DISPATCH_ID" ...\n'
    request = dataclasses.replace(make_request(tmp_path), brief=brief)
    result = ClaudeCoder().dispatch(request)
    assert result.stop_reason is StopReason.COMPLETED, result
    seen = recorded(tmp_path)
    at = seen["argv"].index("--append-system-prompt-file")
    # In a file, verbatim: a task of any length fits (one argument is limited to 128 KiB).
    assert Path(seen["argv"][at + 1]).read_text() == brief
    assert "--dangerously-skip-permissions" in seen["argv"]
    assert "--permission-mode" not in seen["argv"]
    assert seen["env"]["IS_SANDBOX"] == "1"
    assert seen["stdin"] == request.prompt  # the task itself still goes in on stdin


def test_no_brief_no_append_flag(tmp_path: Path) -> None:
    ClaudeCoder().dispatch(make_request(tmp_path))
    assert not any(a.startswith("--append-system-prompt") for a in recorded(tmp_path)["argv"])


def _skill(config: Path) -> tuple[dict[str, object], str]:
    text = (config / "skills" / SKILL_NAME / "SKILL.md").read_text()
    assert text.startswith("---\n")
    front, body = text[4:].split("\n---\n", 1)
    meta = yaml.safe_load(front)
    assert isinstance(meta, dict)
    return meta, body


def test_the_halt_skill_is_installed_in_a_private_config_dir_in_the_output_folder(
    tmp_path: Path,
) -> None:
    request = make_request(tmp_path)
    ClaudeCoder().dispatch(request)
    config = Path(recorded(tmp_path)["env"]["CLAUDE_CONFIG_DIR"])
    # No private home given: claude writes its config, so it is in the output folder, never
    # in the engine's log folder.
    assert config == request.output_dir / "claude-home" / ".claude"
    meta, body = _skill(config)
    assert meta["name"] == SKILL_NAME == "assay-halts"
    assert "assay halt check" in str(meta["description"])
    # The query and fire forms, exactly as the brief gives them.
    assert query_command("halt-spec-contradiction") in body
    assert '--condition halt-spec-contradiction --fire --evidence "' in body
    assert "halt-check-sticky-rejection" in body


def test_the_config_dir_lives_in_the_seat_private_home_when_there_is_one(
    tmp_path: Path,
) -> None:
    home = tmp_path / "seat-1.home"
    request = dataclasses.replace(make_request(tmp_path), home=home)
    ClaudeCoder().dispatch(request)
    config = Path(recorded(tmp_path)["env"]["CLAUDE_CONFIG_DIR"])
    assert config == home / ".claude"
    assert _skill(config)[0]["name"] == SKILL_NAME


SKILL_FILE = f".claude/skills/{SKILL_NAME}/SKILL.md"


@pytest.mark.parametrize(
    "planted", [".claude", ".claude/skills", f".claude/skills/{SKILL_NAME}", SKILL_FILE]
)
def test_a_link_an_earlier_attempt_left_in_the_home_is_replaced_not_followed(
    tmp_path: Path, planted: str
) -> None:
    home = tmp_path / "seat-1.home"
    outside = tmp_path / "operator"
    outside.mkdir()
    (outside / "SKILL.md").write_text("the operator's file\n")
    (home / planted).parent.mkdir(parents=True, exist_ok=True)
    (home / planted).symlink_to(outside / "SKILL.md" if planted == SKILL_FILE else outside)
    ClaudeCoder().dispatch(dataclasses.replace(make_request(tmp_path), home=home))
    assert [p.name for p in outside.iterdir()] == ["SKILL.md"]  # nothing written there
    assert (outside / "SKILL.md").read_text() == "the operator's file\n"
    assert not (home / planted).is_symlink() and not (home / SKILL_FILE).is_symlink()
    assert _skill(home / ".claude")[0]["name"] == SKILL_NAME


def test_an_unwritable_config_dir_is_an_environment_error(tmp_path: Path) -> None:
    home = tmp_path / "home-file"
    home.write_text("not a folder")
    result = ClaudeCoder().dispatch(dataclasses.replace(make_request(tmp_path), home=home))
    assert result.exit_code is None
    assert result.environment_error is not None
    assert "config folder" in result.environment_error


def test_max_turns_is_turn_budget_end_to_end(tmp_path: Path) -> None:
    result = ClaudeCoder().dispatch(make_request(tmp_path, scenario="max_turns", max_turns=4))
    assert result.stop_reason is StopReason.TURN_BUDGET
    assert result.turns_used == 4 and result.cost_usd == 0.0456


@pytest.mark.parametrize(
    ("scenario", "kind"), [("rate_limit", "rate_limit"), ("usage_limit", "usage_limit")]
)
def test_limits_are_provider_faults_with_reset(tmp_path: Path, scenario: str, kind: str) -> None:
    env = {"STANDIN_RESET_EPOCH": str(RESET)}
    result = ClaudeCoder().dispatch(make_request(tmp_path, scenario=scenario, env=env))
    assert result.stop_reason is StopReason.PROVIDER_FAULT and result.provider_fault
    assert result.quota is not None and result.quota.kind == kind
    assert result.quota.reset_at == datetime.fromtimestamp(RESET, UTC)
    assert changed(make_request(tmp_path).worktree) == []


@pytest.mark.parametrize(
    ("scenario", "stop"),
    [("context", StopReason.CONTEXT_BUDGET), ("server_error", StopReason.PROVIDER_FAULT)],
)
def test_context_and_server_errors(tmp_path: Path, scenario: str, stop: StopReason) -> None:
    result = ClaudeCoder().dispatch(make_request(tmp_path, scenario=scenario))
    assert result.stop_reason is stop
    assert result.quota is None and result.error


def test_rejected_key_is_the_operators_setting_never_a_login(tmp_path: Path) -> None:
    result = ClaudeCoder().dispatch(make_request(tmp_path, scenario="auth"))
    assert result.environment_error is None  # not a machine fault: never refunded
    assert result.setting_error is not None
    assert result.setting_error.startswith("claude: no usable API key (it asked for a login):")
    assert "set ANTHROPIC_API_KEY" in result.setting_error
    assert "/login" not in result.setting_error and "/login" not in (result.error or "")


def test_claude_without_a_key_is_never_started(tmp_path: Path) -> None:
    request = harness_request(tmp_path)  # no key in its environment
    result = ClaudeCoder().dispatch(request)
    assert result.exit_code is None and not (tmp_path / "record.json").exists()
    assert result.setting_error is not None
    assert result.setting_error.startswith("claude: no API key: set ANTHROPIC_API_KEY")
    assert "a `claude login` on this machine is never used" in result.setting_error


@pytest.mark.parametrize(
    "env",
    [
        {"ANTHROPIC_AUTH_TOKEN": "t"},
        {"CLAUDE_CODE_USE_BEDROCK": "1"},
        {"CLAUDE_CODE_USE_VERTEX": "1"},
    ],
)
def test_claude_starts_with_any_credential_it_accepts(tmp_path: Path, env: dict[str, str]) -> None:
    result = ClaudeCoder().dispatch(harness_request(tmp_path, env=env))
    assert result.setting_error is None and (tmp_path / "record.json").exists()


def test_crash_sets_error(tmp_path: Path) -> None:
    result = ClaudeCoder().dispatch(make_request(tmp_path, scenario="crash"))
    assert result.stop_reason is None and result.exit_code == 1
    assert result.error is not None and "TypeError" in result.error


def test_missing_binary_is_the_operators_setting_with_install_hint(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    result = ClaudeCoder().dispatch(make_request(tmp_path, path=str(empty)))
    assert result.exit_code is None and result.environment_error is None
    assert result.setting_error == (
        "claude not found on PATH: install it with `npm install -g @anthropic-ai/claude-code`"
    )


def test_timeout_kills_and_reports_timed_out(tmp_path: Path) -> None:
    result = ClaudeCoder().dispatch(make_request(tmp_path, scenario="sleep", timeout=0.5))
    assert result.timed_out and result.exit_code is None
    assert result.wall_time_ms < 5000
    assert result.error is not None and "timed out" in result.error


def test_honoured_settings() -> None:
    assert {"model", "max_turns", "timeout_seconds", "args"} <= ClaudeCoder.honoured_settings


def test_an_overloaded_api_loses_the_seat_to_a_provider_fault(tmp_path: Path) -> None:
    result = ClaudeCoder().dispatch(make_request(tmp_path, scenario="server_error"))
    assert result.fault is not None
    assert result.fault.detail.startswith("claude: API Error: 529")
    assert "overloaded" in result.fault.detail
    # claude repeats the API error in its result text: the detail says it once.
    assert result.fault.detail.count("API Error: 529") == 1


@pytest.mark.parametrize("scenario", ["context", "auth", "usage_limit"])
def test_other_failures_are_not_provider_faults(tmp_path: Path, scenario: str) -> None:
    assert ClaudeCoder().dispatch(make_request(tmp_path, scenario=scenario)).fault is None


def test_a_run_longer_than_the_read_back_limit_still_parses_right(tmp_path: Path) -> None:
    # Partial messages make a long session's output large: the host reads back its tail only
    # (a line saying so, then a cut line), where claude's result and last message are.
    meter = BudgetMeter()
    request = dataclasses.replace(make_request(tmp_path, scenario="long"), meter=meter)
    result = ClaudeCoder().dispatch(request)
    assert (request.log_dir / "claude.log.out").stat().st_size > MAX_OUTPUT_READ
    assert result.stop_reason is StopReason.COMPLETED and result.error is None, result
    assert result.report is not None and result.report.summary == "All done."
    assert (result.turns_used, result.cost_usd, result.tokens_used) == (41, 0.5, 43050)
    # Read whole while it ran: every message, all 41 of them.
    assert result.usage is not None and result.usage.calls == 41
    assert meter.reports[-1] == result.usage
