"""The usage readers, on output captured from the real programs (``usage_samples/``: claude
2.1.332, codex 0.171.0, aider 0.86.2 and mini-swe-agent 2.4.6 run against the scripted model
server, trimmed): the running totals as the output arrives, the final figures, and that the
adapters' final parsers report the same.

The claude samples: ``claude-*-partial-*`` were run with ``--include-partial-messages`` (as
the adapter runs it), the others without (older output, read through its assistant events);
``partial-stopped`` is a claude looping on tool calls, stopped with SIGTERM after the server
answered its third call (3 x 1200 in, 50 out)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.adapters.coders.agentcli import ParsedRun
from assay.adapters.coders.aider import parse_aider_output
from assay.adapters.coders.claude import parse_claude_stream
from assay.adapters.coders.claude_usage import ClaudeUsage
from assay.adapters.coders.codex import parse_codex_events
from assay.adapters.coders.mini import parse_mini_run
from assay.adapters.coders.usage_read import (
    AiderUsage,
    CodexEvents,
    CodexRollout,
    LineReader,
    mini_usage,
    read_all,
)
from assay.core.usage import UsageFigures
from assay.core.vocab import StopReason

SAMPLES = Path(__file__).resolve().parents[2] / "support" / "usage_samples"
CLAUDE = "claude-2.1.332-success.jsonl"
CLAUDE_BUDGET = "claude-2.1.332-budget.jsonl"
PARTIAL = "claude-2.1.332-partial-success.jsonl"
PARTIAL_BUDGET = "claude-2.1.332-partial-budget.jsonl"
PARTIAL_STOPPED = "claude-2.1.332-partial-stopped.jsonl"
CODEX = "codex-0.171.0-exec.jsonl"
ROLLOUT = "codex-0.171.0-rollout.jsonl"
AIDER = "aider-0.86.2-priced.txt"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def running(reader: LineReader, text: str) -> list[UsageFigures]:
    """The distinct running totals as ``text`` arrives a line at a time, then the final."""
    totals: list[UsageFigures] = []
    for line in text.splitlines(keepends=True):
        reader.feed(line)
        figures = reader.figures()
        if figures is not None and (not totals or totals[-1] != figures):
            totals.append(figures)
    reader.close()
    assert reader.figures() == totals[-1]
    return totals


# -- claude -------------------------------------------------------------------------------------


def test_claude_streams_each_call_and_the_result_settles_output_and_cost() -> None:
    totals = running(ClaudeUsage(), sample(CLAUDE))
    # Each assistant message as it arrives (its output count is the 1 claude starts it with).
    assert [(t.tokens_in, t.tokens_out, t.calls) for t in totals[:3]] == [
        (1200, 1, 1),
        (2700, 2, 2),
        (4700, 3, 3),
    ]
    assert all(t.cost_usd is None for t in totals[:3])
    assert totals[-1] == UsageFigures(4700, 140, 0.0162, "claude-sonnet-4-5", calls=3)


def test_claude_stopped_by_its_budget_counts_the_call_its_result_usage_leaves_out() -> None:
    # The result's usage says 1200 + 50: the first call only; modelUsage and the cost say two.
    figures = read_all(ClaudeUsage(), sample(CLAUDE_BUDGET)).figures()
    assert figures == UsageFigures(2700, 110, 0.00975, "claude-sonnet-4-5", calls=2)
    parsed = parse_claude_stream(sample(CLAUDE_BUDGET), exit_code=1)
    assert parsed.stop_reason is StopReason.TURN_BUDGET
    assert parsed.error == "claude stopped at its --max-budget-usd limit"


def assistant(ident: str, tokens_in: int, tokens_out: int, model: str = "m") -> str:
    usage = {"input_tokens": tokens_in, "output_tokens": tokens_out}
    message = {"id": ident, "model": model, "usage": usage, "content": []}
    return json.dumps({"type": "assistant", "message": message}) + "\n"


def test_claude_message_repeated_per_content_block_counts_once_at_its_largest_figures() -> None:
    reader = ClaudeUsage()
    reader.feed(assistant("m1", 100, 1) + assistant("m1", 100, 7) + assistant("m1", 100, 1))
    reader.feed(assistant("m2", 50, 2))
    assert reader.figures() == UsageFigures(150, 9, model="m", calls=2)


def test_claude_partial_messages_give_each_call_its_final_output_as_it_ends() -> None:
    totals = running(ClaudeUsage(), sample(PARTIAL))
    # message_start: the call's input, output 1; message_delta: its final output count.
    assert [(t.tokens_in, t.tokens_out, t.calls) for t in totals[:6]] == [
        (1200, 1, 1),
        (1200, 50, 1),
        (2700, 51, 2),
        (2700, 110, 2),
        (4700, 111, 3),
        (4700, 140, 3),
    ]
    assert totals[-1] == UsageFigures(4700, 140, 0.0162, "claude-sonnet-4-5", calls=3)


def test_claude_stopped_before_its_result_is_counted_in_full_from_its_partial_messages() -> None:
    text = sample(PARTIAL_STOPPED)
    assert '"type":"result"' not in text
    figures = read_all(ClaudeUsage(), text).figures()
    assert figures == UsageFigures(3 * 1200, 3 * 50, None, "claude-sonnet-4-5", calls=3)
    # Without the stream events (as claude printed it before): output 1 per call.
    older = "".join(line for line in text.splitlines(True) if '"stream_event"' not in line)
    assert read_all(ClaudeUsage(), older).figures() == UsageFigures(
        3600, 3, None, "claude-sonnet-4-5", calls=3
    )


def test_claude_partial_budget_stop_reads_as_before() -> None:
    figures = read_all(ClaudeUsage(), sample(PARTIAL_BUDGET)).figures()
    assert figures == UsageFigures(2400, 100, 0.0087, "claude-sonnet-4-5", calls=2)


def stream_event(event: dict[str, object], **line: object) -> str:
    """A stream event line, compact as claude prints it."""
    doc = {"type": "stream_event", "event": event, **line}
    return json.dumps(doc, separators=(",", ":")) + "\n"


def start(ident: str, tokens_in: int, model: str = "m") -> dict[str, object]:
    usage = {"input_tokens": tokens_in, "output_tokens": 1}
    return {"type": "message_start", "message": {"id": ident, "model": model, "usage": usage}}


def delta(tokens_out: int) -> dict[str, object]:
    return {"type": "message_delta", "delta": {}, "usage": {"output_tokens": tokens_out}}


def test_claude_message_delta_belongs_to_the_message_its_stream_started() -> None:
    # A subagent's stream (its parent tool call) interleaved with the main one; no line
    # names its message, as an older claude prints them.
    main: dict[str, object] = {"session_id": "s", "parent_tool_use_id": None}
    sub: dict[str, object] = {"session_id": "s", "parent_tool_use_id": "toolu_1"}
    reader = ClaudeUsage()
    reader.feed(stream_event(start("a", 100), **main) + stream_event(start("b", 30), **sub))
    reader.feed(stream_event(delta(7), **main) + stream_event(delta(4), **sub))
    assert reader.messages == {"a": (100, 7), "b": (30, 4)}
    # A line that names its message is counted there, whichever stream started last.
    reader.feed(stream_event(delta(9), api_message_id="b", **main))
    assert reader.messages == {"a": (100, 7), "b": (30, 9)}


def test_claude_message_delta_of_no_started_message_is_ignored() -> None:
    reader = read_all(ClaudeUsage(), stream_event(delta(50), session_id="s"))
    assert reader.figures() is None


def test_claude_assistant_event_after_the_delta_does_not_lower_the_output() -> None:
    # claude prints a message's assistant events (output 1) before its delta; in any order,
    # the message counts at its largest figures.
    reader = ClaudeUsage()
    reader.feed(stream_event(start("m1", 100), session_id="s") + assistant("m1", 100, 1))
    reader.feed(stream_event(delta(60), session_id="s") + assistant("m1", 100, 1))
    assert reader.figures() == UsageFigures(100, 60, model="m", calls=1)


def test_claude_content_events_are_not_usage() -> None:
    # Text that looks like a usage event, inside a content delta, is the model's text.
    text = json.dumps({"type": "message_delta", "usage": {"output_tokens": 999}})
    piece = {"type": "text_delta", "text": text}
    content = {"type": "content_block_delta", "index": 0, "delta": piece}
    line = stream_event(content, session_id="s", api_message_id="m1")
    reader = ClaudeUsage()
    reader.feed(stream_event(start("m1", 100), session_id="s"))
    reader.feed(line + line.replace(",", ", "))  # skipped unread, and read
    assert reader.figures() == UsageFigures(100, 1, model="m", calls=1)


def test_claude_api_error_message_is_no_call() -> None:
    reader = ClaudeUsage()
    reader.feed(assistant("m1", 100, 5, "claude-x") + assistant("e1", 0, 0, "<synthetic>"))
    assert reader.figures() == UsageFigures(100, 5, model="claude-x", calls=1)


def test_claude_without_any_usage_reports_nothing() -> None:
    out = '{"type":"system","subtype":"init"}\nnot json\n'
    assert read_all(ClaudeUsage(), out).figures() is None


# -- codex --------------------------------------------------------------------------------------


def test_codex_stdout_gives_the_turn_once_it_ended_and_the_thread_id() -> None:
    reader = read_all(CodexEvents(), sample(CODEX))
    assert reader.figures() == UsageFigures(4700, 140, calls=1)
    assert reader.thread_id == "01a241f3-ba6e-7953-b0c3-7f69c4e71af5"


def test_codex_session_file_gives_every_call_as_it_is_made() -> None:
    totals = running(CodexRollout(), sample(ROLLOUT))
    assert [(t.tokens_in, t.tokens_out, t.calls) for t in totals] == [
        (1200, 50, 1),
        (2700, 110, 2),
        (4700, 140, 3),
    ]
    assert totals[-1].model == "scripted-model" and totals[-1].cost_usd is None


def test_a_record_appended_to_the_session_file_never_lowers_a_call() -> None:
    """The coder's commands can write its session file: a second record of a call it already
    made, with smaller figures, must not hide it (and the next call behind it)."""
    reader = read_all(CodexRollout(), sample(ROLLOUT))
    first = next(line for line in sample(ROLLOUT).splitlines() if "token_usage_record" in line)
    entry = json.loads(first)
    entry["payload"]["usage"] = {"input_tokens": 0, "output_tokens": 0}
    reader.feed(json.dumps(entry) + "\n")
    reader.close()
    figures = reader.figures()
    assert figures is not None and (figures.tokens_in, figures.tokens_out) == (4700, 140)


def test_codex_thread_id_that_is_not_a_name_is_ignored() -> None:
    reader = read_all(CodexEvents(), '{"type":"thread.started","thread_id":"../../etc"}\n')
    assert reader.thread_id is None


# -- aider --------------------------------------------------------------------------------------


def test_aider_priced_run_reports_each_reply_and_the_session_cost() -> None:
    totals = running(AiderUsage(), sample(AIDER))
    assert totals == [
        UsageFigures(1200, 50, 0.0043, "openai/scripted-model", calls=1),
        UsageFigures(1200 + 2500, 50 + 1200, 0.03, "openai/scripted-model", calls=2),
    ]


def test_aider_cost_on_the_line_after_the_tokens_is_read() -> None:
    # Both cache figures given: aider puts the cost report on a line of its own.
    out = "Tokens: 2.3k sent, 1.1k cache write, 4.2k cache hit, 181 received.\n"
    out += "Cost: $0.0076 message, $0.01 session.\n"
    assert read_all(AiderUsage(), out).figures() == UsageFigures(2300, 181, 0.01, calls=1)


def test_aider_unpriced_model_has_tokens_and_no_cost() -> None:
    figures = read_all(AiderUsage(), "Tokens: 1.2k sent, 50 received.").figures()
    assert figures == UsageFigures(1200, 50, None, calls=1)


# -- mini ---------------------------------------------------------------------------------------


def test_mini_trajectory_after_one_step_and_at_the_end() -> None:
    step = mini_usage(sample("mini-2.4.6-step1.traj.json"))
    assert step == UsageFigures(900, 30, 0.00315, "openai/scripted-model", calls=1)
    end = mini_usage(sample("mini-2.4.6-submitted.traj.json"))
    assert end == UsageFigures(900 + 950 + 1000, 30 + 20 + 10, 0.00945, end.model, calls=3)


def test_mini_trajectory_caught_mid_write_reads_as_none() -> None:
    text = sample("mini-2.4.6-submitted.traj.json")
    assert mini_usage(text[: len(text) // 2]) is None
    assert mini_usage(None) is None and mini_usage("[]") is None


def test_mini_unpriced_total_of_zero_is_unknown() -> None:
    doc = {"info": {"model_stats": {"instance_cost": 0.0, "api_calls": 1}}, "messages": []}
    assert mini_usage(json.dumps(doc)) == UsageFigures(0, 0, None, calls=1)


# -- the final parsers read the same ------------------------------------------------------------

# What the parsers reported before they read through the readers (tokens, cost); the budget
# stop was 1200 + 50 then, the result's usage alone.
PARSED: list[tuple[str, Callable[[str], ParsedRun], int, float | None]] = [
    (CLAUDE, parse_claude_stream, 4840, 0.0162),
    (CLAUDE_BUDGET, lambda t: parse_claude_stream(t, exit_code=1), 2810, 0.00975),
    (PARTIAL, parse_claude_stream, 4840, 0.0162),
    (PARTIAL_BUDGET, lambda t: parse_claude_stream(t, exit_code=1), 2500, 0.0087),
    (PARTIAL_STOPPED, lambda t: parse_claude_stream(t, exit_code=None), 3750, None),
    (CODEX, parse_codex_events, 4840, None),
    (AIDER, parse_aider_output, 4950, 0.03),
    ("mini-2.4.6-submitted.traj.json", parse_mini_run, 2910, 0.00945),
]


@pytest.mark.parametrize("name", [PARTIAL, PARTIAL_BUDGET, PARTIAL_STOPPED])
def test_claude_final_parse_reads_the_run_alike_with_or_without_stream_events(name: str) -> None:
    text = sample(name)
    older = "".join(line for line in text.splitlines(True) if '"stream_event"' not in line)
    parsed, without = (
        parse_claude_stream(text, exit_code=1),
        parse_claude_stream(older, exit_code=1),
    )
    # The usage is what they add (the stopped run's output); all else reads the same.
    assert parsed.usage is not None and without.usage is not None
    assert parsed.usage.tokens_out >= without.usage.tokens_out
    parsed.usage = without.usage = None
    parsed.tokens_used = without.tokens_used = None
    assert parsed == without


@pytest.mark.parametrize(("name", "parse", "tokens", "cost"), PARSED)
def test_final_parse_reports_the_reader_figures(
    name: str, parse: Callable[[str], ParsedRun], tokens: int, cost: float | None
) -> None:
    parsed = parse(sample(name))
    assert parsed.usage is not None
    assert (parsed.tokens_used, parsed.cost_usd) == (tokens, cost)
    assert (parsed.usage.tokens, parsed.usage.cost_usd) == (tokens, cost)


# -- any chunking -------------------------------------------------------------------------------

READERS: list[tuple[str, Callable[[], LineReader]]] = [
    (CLAUDE, ClaudeUsage),
    (CLAUDE_BUDGET, ClaudeUsage),
    (PARTIAL, ClaudeUsage),
    (PARTIAL_BUDGET, ClaudeUsage),
    (PARTIAL_STOPPED, ClaudeUsage),
    (CODEX, CodexEvents),
    (ROLLOUT, CodexRollout),
    (AIDER, AiderUsage),
]


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(READERS),
    st.lists(st.integers(min_value=0, max_value=20_000), max_size=12),
    st.booleans(),
)
def test_any_chunking_gives_the_same_figures(
    case: tuple[str, Callable[[], LineReader]], cuts: list[int], crlf: bool
) -> None:
    name, make = case
    text = sample(name)
    if crlf:
        text = text.replace("\n", "\r\n")
    whole = read_all(make(), text).figures()
    reader = make()
    at = 0
    for cut in sorted(c % (len(text) + 1) for c in cuts):
        reader.feed(text[at:cut])
        at = cut
    reader.feed(text[at:])
    reader.close()
    assert reader.figures() == whole is not None


class Lines(LineReader):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def line(self, text: str) -> None:
        self.lines.append(text)

    def figures(self) -> UsageFigures | None:
        return None


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet="ab\r\n{}", max_size=12), max_size=10))
def test_lines_are_the_same_however_the_output_is_cut(chunks: list[str]) -> None:
    whole = read_all(Lines(), "".join(chunks)).lines
    reader = Lines()
    for chunk in chunks:
        reader.feed(chunk)
    reader.close()
    # Python's own reading of the text: the lines the final parse sees (blank ones skipped).
    assert reader.lines == whole == [s for s in "".join(chunks).splitlines() if s]


def test_an_endless_line_is_dropped_not_kept() -> None:
    reader = Lines()
    reader.feed("x" * (5 * 1024 * 1024))
    reader.feed("y" * 10 + "\nnext\n")
    reader.close()
    assert reader.lines == ["next"]
