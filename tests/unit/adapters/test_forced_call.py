"""The forced-call loop both judges share, against the scripted model server."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from support.model_server import ModelServer, ToolCall, Turn, Usage

from assay.adapters.forced_call import ForcedAnswer, ask_forced, call_failed, calls_to
from assay.adapters.llm_client import (
    ChatClient,
    ChatReply,
    Endpoint,
    FailureKind,
    LlmError,
    ToolCallRequest,
    function_tool,
)

PICK = function_tool("pick", "Pick a number.", {"n": {"type": "integer"}}, ["n"])
FORCE_PICK = {"type": "function", "function": {"name": "pick"}}
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "Answer by calling `pick`."},
    {"role": "user", "content": "Pick a number."},
]


def read_pick(reply: ChatReply) -> tuple[int | None, str]:
    calls = [call for call in reply.tool_calls if call.name == "pick"]
    if not calls:
        return None, "no `pick` call"
    n = calls[0].parsed_arguments().get("n")
    return (n, "") if isinstance(n, int) else (None, f"n is {n!r}, not a number")


def retry(problem: str) -> str:
    return f"Not usable ({problem}). Call `pick`."


def client_for(server: ModelServer) -> ChatClient:
    return ChatClient(Endpoint("scripted-model", server.base_url, "anything", timeout=20.0))


class Events:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, **event: Any) -> None:
        self.events.append(event)

    @property
    def kinds(self) -> list[str]:
        return [str(e["event"]) for e in self.events]


def ask(server: ModelServer, *, turns: int = 3, log: Events | None = None) -> ForcedAnswer[int]:
    return ask_forced(
        client_for(server),
        MESSAGES,
        PICK,
        read_pick,
        turns=turns,
        deadline=time.monotonic() + 20,
        retry_message=retry,
        log=log,
    )


def test_a_usable_first_answer(model_server: ModelServer) -> None:
    model_server.script(Turn.call("pick", {"n": 7}, usage=Usage(30, 12)))
    log = Events()
    asked = ask(model_server, log=log)
    assert (asked.answer, asked.problems, asked.tokens, asked.error) == (7, (), 42, None)
    [sent] = model_server.completions
    assert sent.body["tool_choice"] == FORCE_PICK
    assert sent.body["tools"] == [PICK]
    assert sent.body["messages"] == MESSAGES
    assert log.kinds == ["request", "call", "reply"]
    assert log.events[0]["model"] == "scripted-model"
    assert log.events[2]["tokens"] == 42


def test_an_unusable_answer_is_sent_back_with_its_problem(model_server: ModelServer) -> None:
    bad = ToolCall("pick", {"n": "seven"}, id="call_bad")
    other = ToolCall("shout", {}, id="call_other")
    model_server.script(Turn.calls(bad, other, text="hmm"), Turn.call("pick", {"n": 3}))
    before = [dict(m) for m in MESSAGES]
    asked = ask(model_server)
    assert (asked.answer, asked.problems, asked.tokens) == (3, ("n is 'seven', not a number",), 240)
    first, second = model_server.completions
    assert first.body["messages"] == MESSAGES
    sent_back = second.body["messages"][len(MESSAGES) :]
    assert sent_back[0]["role"] == "assistant" and sent_back[0]["content"] == "hmm"
    assert [c["id"] for c in sent_back[0]["tool_calls"]] == ["call_bad", "call_other"]
    rejected = "rejected: n is 'seven', not a number"
    assert sent_back[1:] == [
        {"role": "tool", "tool_call_id": "call_bad", "content": rejected},
        {"role": "tool", "tool_call_id": "call_other", "content": rejected},
        {"role": "user", "content": retry("n is 'seven', not a number")},
    ]
    assert second.body["tool_choice"] == FORCE_PICK
    assert before == MESSAGES  # the caller's conversation is left as it was


def test_no_usable_answer_within_the_turns(model_server: ModelServer) -> None:
    model_server.script(Turn.reply("seven"), Turn.call("pick", {"n": None}), Turn.reply("x"))
    log = Events()
    asked = ask(model_server, turns=2, log=log)
    assert asked.answer is None and asked.error is None
    assert asked.problems == ("no `pick` call", "n is None, not a number")
    assert asked.tried() == "turn 1: no `pick` call; turn 2: n is None, not a number"
    assert asked.tokens == 240
    assert len(model_server.completions) == 2 and model_server.remaining == 1
    assert log.kinds == ["request", "call", "reply", "call", "reply"]


def test_a_failed_call_ends_the_asking(model_server: ModelServer) -> None:
    model_server.script(Turn.reply("seven"), Turn.rate_limited(retry_after=7), Turn.reply("x"))
    log = Events()
    asked = ask(model_server, log=log)
    assert asked.answer is None and asked.problems == ("no `pick` call",)
    assert asked.tokens == 120  # the reply before the failure still counts
    assert asked.error is not None and asked.error.kind is FailureKind.QUOTA
    assert asked.error.quota is not None and asked.error.quota.kind == "rate_limit"
    assert len(model_server.completions) == 2 and model_server.remaining == 1
    assert log.kinds == ["request", "call", "reply", "call", "error"]
    assert log.events[-1]["kind"] == "quota"
    assert call_failed(asked.error).startswith(
        "the judge's model call failed (rate or usage limit): HTTP 429: "
    )


def test_without_a_log_nothing_is_written(model_server: ModelServer) -> None:
    model_server.script(Turn.server_error())
    asked = ask(model_server, log=None)
    assert asked.error is not None and asked.error.kind is FailureKind.PROVIDER
    assert asked.tokens == 0


def test_call_failed_names_the_role_and_the_reason() -> None:
    fault = LlmError(FailureKind.PROVIDER, "HTTP 500: down")
    assert call_failed(fault) == "the judge's model call failed (failure): HTTP 500: down"
    assert call_failed(fault, "coder") == "the coder's model call failed (failure): HTTP 500: down"


def test_calls_to_picks_the_forced_function() -> None:
    pick = ToolCallRequest("c1", "pick", "{}")
    shout = ToolCallRequest("c2", "shout", "{}")

    def reply(*calls: ToolCallRequest) -> ChatReply:
        return ChatReply(text=None, tool_calls=calls, finish_reason="tool_calls")

    assert calls_to(reply(shout, pick, pick), "pick") == ([pick, pick], "")
    assert calls_to(reply(shout, shout), "pick") == ([], "called shout, shout instead of `pick`")
    assert calls_to(reply(), "pick") == ([], "no `pick` call")


class _Clocked(ChatClient):
    """Answers unusably without a request, keeping the timeout each call was given."""

    def __init__(self) -> None:
        super().__init__(Endpoint("fake", "http://127.0.0.1:9/v1", "key", timeout=99.0))
        self.timeouts: list[float] = []

    def complete(self, messages: Sequence[Mapping[str, Any]], **options: Any) -> ChatReply:
        self.timeouts.append(options["timeout"])
        time.sleep(0.01)
        return ChatReply(text="no", tool_calls=(), finish_reason="stop", total_tokens=5)


def test_every_call_shares_one_deadline() -> None:
    client = _Clocked()
    deadline = time.monotonic() + 30
    asked = ask_forced(
        client, MESSAGES, PICK, read_pick, turns=3, deadline=deadline, retry_message=retry
    )
    assert asked.answer is None and asked.tokens == 15 and len(asked.problems) == 3
    first, second, third = client.timeouts
    assert 29 < first <= 30 and first > second > third
