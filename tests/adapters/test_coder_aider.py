"""The aider adapter: its output scanner on captured lines (its exit code is not trusted), and
the adapter end to end against the stand-in ``aider`` in a real git worktree."""

from __future__ import annotations

import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.adapters.coders.agentcli import ParsedRun, to_result
from assay.adapters.coders.aider import AiderCoder, final_reply, parse_aider_output
from assay.adapters.process import ProcessResult
from assay.core.vocab import StopReason

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "standins"))

from coder_harness import changed, make_request, recorded

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
RATE = (
    "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached for gpt-4o. "
    "Please try again in 20s."
)
RATE_HINT = "The API provider has rate limited you. Try again later or check your quotas."


def test_usage_lines_are_summed_and_session_cost_kept() -> None:
    out = "\n".join(
        [
            "Aider v0.86.1",
            "Tokens: 116 sent, 30 received.",
            "Applied edit to app.py",
            "Tokens: 2.3k sent, 1.1k cache write, 4.2k cache hit, 181 received. "
            "Cost: $0.0076 message, $0.01 session.",
            "Tokens: 12k sent, 1,024 received. Cost: $0.03 message, $0.04 session.",
        ]
    )
    parsed = parse_aider_output(out)
    assert parsed.stop_reason is StopReason.COMPLETED
    assert parsed.tokens_used == 116 + 30 + 2300 + 181 + 12000 + 1024
    assert (parsed.turns_used, parsed.cost_usd) == (3, 0.04)
    assert parsed.summary == "Applied edit to app.py"


def test_fatal_error_after_the_last_call_beats_exit_code_zero() -> None:
    out = "\n".join([RATE, RATE_HINT, "Retrying in 0.2 seconds...", RATE, RATE_HINT])
    parsed = parse_aider_output(out, exit_code=0, now=NOW)
    assert parsed.stop_reason is StopReason.PROVIDER_FAULT
    assert parsed.quota is not None and parsed.quota.kind == "rate_limit"
    assert parsed.quota.reset_at == NOW + timedelta(seconds=20)


def test_an_error_followed_by_a_successful_call_was_transient() -> None:
    out = "\n".join([RATE, RATE_HINT, "Retrying in 0.2 seconds...", "Tokens: 1k sent, 9 received."])
    assert parse_aider_output(out).stop_reason is StopReason.COMPLETED


@pytest.mark.parametrize(
    ("lines", "stop"),
    [
        (
            [
                "Model gpt-4o has hit a token limit!",
                "Input tokens: ~131,072 of 128,000 -- possibly exhausted context window!",
            ],
            StopReason.CONTEXT_BUDGET,
        ),
        (
            [
                "litellm.InternalServerError: InternalServerError: OpenAIException - boom",
                "The API provider's servers are down or overloaded.",
            ],
            StopReason.PROVIDER_FAULT,
        ),
        (["litellm.BadRequestError: OpenAIException - Invalid value for 'model'"], None),
    ],
)
def test_errors_map_to_stop_reasons(lines: list[str], stop: StopReason | None) -> None:
    parsed = parse_aider_output("\n".join(["Aider v0.86.1", *lines]), exit_code=0)
    assert parsed.stop_reason is stop
    assert parsed.error


def test_error_names_in_code_or_lint_output_are_not_errors() -> None:
    out = "\n".join(
        [
            "Tokens: 1k sent, 9 received.",
            "Applied edit to client.py",
            "client.py:12:5: F821 undefined name 'RateLimitError'",
            "    except RateLimitError:",
            "Timeout: 600",
        ]
    )
    assert parse_aider_output(out).stop_reason is StopReason.COMPLETED


def test_descriptions_alone_are_read() -> None:
    out = "The API provider timed out without returning a response. They may be down or overloaded."
    parsed = parse_aider_output(out)
    assert parsed.stop_reason is StopReason.PROVIDER_FAULT and parsed.quota is None


def test_insufficient_quota_is_a_usage_limit() -> None:
    line = (
        "litellm.RateLimitError: OpenAIException - You exceeded your current quota. "
        "insufficient_quota"
    )
    parsed = parse_aider_output(line)
    assert parsed.quota is not None and parsed.quota.kind == "usage_limit"


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.text(max_size=60)
        | st.sampled_from(
            ["Tokens: ", "Cost: $", " sent, ", " received.", RATE, "k", "9."]
        ).flatmap(lambda s: st.text(max_size=20).map(lambda t: s + t)),
        max_size=10,
    ),
    st.integers(-2, 3) | st.none(),
)
def test_parser_never_raises(lines: list[str], code: int | None) -> None:
    parsed = parse_aider_output("\n".join(lines), stderr="x", exit_code=code, now=NOW)
    assert isinstance(parsed, ParsedRun)
    to_result("aider", ProcessResult(code, "", "", False, 5, Path("log")), parsed)


# The adapter against the stand-in ---------------------------------------------------------


def test_edit_completes_with_usage_and_cost(tmp_path: Path) -> None:
    request = make_request(tmp_path, settings={"model": "gpt-4o", "base_url": "http://h:1/v1"})
    result = AiderCoder().dispatch(request)
    assert result.stop_reason is StopReason.COMPLETED, result
    assert result.tokens_used == 2300 + 181 + 3100 + 95
    assert (result.turns_used, result.cost_usd) == (2, 0.02)
    # The edit is the only change: aider's history and tag cache stay out of the worktree.
    assert changed(request.worktree) == ["standin.txt"]
    seen = recorded(tmp_path)
    assert seen["stdin"] == request.prompt  # the message file's content
    argv = seen["argv"]
    for flag in ("--yes-always", "--no-auto-commits", "--no-gitignore", "--no-stream"):
        assert flag in argv
    assert argv[argv.index("--model") + 1] == "gpt-4o"
    assert argv[argv.index("--openai-api-base") + 1] == "http://h:1/v1"
    assert Path(argv[argv.index("--message-file") + 1]).parent == request.log_dir
    assert Path(argv[argv.index("--chat-history-file") + 1]).is_file()


def test_recovered_rate_limit_is_completed(tmp_path: Path) -> None:
    result = AiderCoder().dispatch(make_request(tmp_path, scenario="recovered"))
    assert result.stop_reason is StopReason.COMPLETED and result.quota is None


def test_rate_limit_with_exit_zero_is_provider_fault_with_reset(tmp_path: Path) -> None:
    before = datetime.now(UTC)
    result = AiderCoder().dispatch(make_request(tmp_path, scenario="rate_limit"))
    assert result.exit_code == 0
    assert result.stop_reason is StopReason.PROVIDER_FAULT
    assert result.quota is not None and result.quota.kind == "rate_limit"
    assert result.quota.reset_at is not None
    assert before + timedelta(seconds=19) < result.quota.reset_at < before + timedelta(seconds=80)


@pytest.mark.parametrize(
    ("scenario", "stop", "quota"),
    [
        ("usage_limit", StopReason.PROVIDER_FAULT, "usage_limit"),
        ("context", StopReason.CONTEXT_BUDGET, None),
        ("server_error", StopReason.PROVIDER_FAULT, None),
        ("fatal_but_exit0", None, None),
    ],
)
def test_fatal_errors_despite_exit_zero(
    tmp_path: Path, scenario: str, stop: StopReason | None, quota: str | None
) -> None:
    result = AiderCoder().dispatch(make_request(tmp_path, scenario=scenario))
    assert result.exit_code == 0
    assert result.stop_reason is stop and result.error
    assert (result.quota.kind if result.quota else None) == quota


def test_rejected_key_is_an_environment_error(tmp_path: Path) -> None:
    result = AiderCoder().dispatch(make_request(tmp_path, scenario="auth"))
    assert result.exit_code == 0 and result.environment_error is not None


def test_crash_sets_error(tmp_path: Path) -> None:
    result = AiderCoder().dispatch(make_request(tmp_path, scenario="crash"))
    assert result.stop_reason is None and result.exit_code == 1
    assert result.error is not None and "KeyError" in result.error


def test_missing_binary_is_environment_error_with_install_hint(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    result = AiderCoder().dispatch(make_request(tmp_path, path=str(empty)))
    assert result.environment_error == (
        "aider not found on PATH: install it with `pip install aider-chat`"
    )


def test_timeout_kills_and_reports_timed_out(tmp_path: Path) -> None:
    result = AiderCoder().dispatch(make_request(tmp_path, scenario="sleep", timeout=0.5))
    assert result.timed_out and result.exit_code is None and result.wall_time_ms < 5000
    assert result.stop_reason is None


def test_max_turns_is_not_honoured() -> None:
    assert "max_turns" not in AiderCoder.honoured_settings
    assert {"model", "timeout_seconds", "args"} <= AiderCoder.honoured_settings


def test_a_server_error_loses_the_seat_to_a_provider_fault(tmp_path: Path) -> None:
    result = AiderCoder().dispatch(make_request(tmp_path, scenario="server_error"))
    assert result.fault is not None and result.fault.detail.startswith("aider: ")
    assert "overloaded" in result.fault.detail
    for scenario in ("context", "usage_limit", "auth"):
        assert AiderCoder().dispatch(make_request(tmp_path, scenario=scenario)).fault is None


# The brief and the final answer -----------------------------------------------------------

BRIEF = "# The rules\nStart your reply with `NO CHANGE NEEDED:` when nothing must change.\n"
# An aider 0.86.2 chat history (tests/interop): notices quoted, the user's message after ####.
HISTORY = """
# aider chat started at 2026-12-01 19:01:27

> Aider v0.86.2
> Added ../seat-1/aider.conventions.md to the chat (read-only).

#### Make slugify keep digits.
#### test_digits must pass.

I need to see src/slug.py first.

> Tokens: 100 sent, 20 received.
> Added src/slug.py to the chat

NO CHANGE NEEDED: test_digits already passes at HEAD;
slugify keeps digits (src/slug.py line 2)

> Tokens: 100 sent, 20 received. Cost: $0.00060 message, $0.00060 session.
"""


def test_the_final_reply_is_the_last_one_in_the_history() -> None:
    assert final_reply(HISTORY) == (
        "NO CHANGE NEEDED: test_digits already passes at HEAD;\n"
        "slugify keeps digits (src/slug.py line 2)"
    )
    assert final_reply("#### only the question\n> a notice\n") is None
    assert final_reply(None) is None


def test_the_final_reply_is_the_summary_unless_an_edit_was_applied() -> None:
    assert parse_aider_output("Tokens: 100 sent, 20 received.", history=HISTORY).summary == (
        final_reply(HISTORY)
    )
    edited = parse_aider_output(
        "Applied edit to a.py\nTokens: 1 sent, 1 received.", history=HISTORY
    )
    assert edited.summary == "Applied edit to a.py"


def test_the_brief_is_a_read_only_conventions_file_outside_the_seat(tmp_path: Path) -> None:
    request = replace(make_request(tmp_path, scenario="no_change"), brief=BRIEF)
    result = AiderCoder().dispatch(request)
    argv = recorded(tmp_path)["argv"]
    brief_file = Path(argv[argv.index("--read") + 1])
    assert brief_file.parent == request.log_dir and brief_file.read_text() == BRIEF
    assert changed(request.worktree) == []  # not in the candidate
    assert result.report is not None
    assert result.report.summary == "NO CHANGE NEEDED: answer() already returns 41 (app.py line 2)"


def test_no_brief_no_read_file(tmp_path: Path) -> None:
    request = make_request(tmp_path)
    AiderCoder().dispatch(replace(request, brief=BRIEF))
    AiderCoder().dispatch(request)
    assert "--read" not in recorded(tmp_path)["argv"]
    assert not (request.log_dir / "aider.conventions.md").exists()
