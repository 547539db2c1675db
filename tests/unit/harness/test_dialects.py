"""The Anthropic Messages and OpenAI Responses dialects answer the way those APIs do."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import openai
import pytest
from openai.types.responses import ResponseCompletedEvent, ResponseFunctionCallArgumentsDeltaEvent
from support.model_server import ModelServer, ToolCall, Turn, Usage


def call(
    server: ModelServer, path: str, body: dict[str, Any] | None = None, method: str = "POST"
) -> tuple[int, dict[str, str], bytes]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"{server.url}{path}",
        data=data,
        headers={"content-type": "application/json", "x-api-key": "k"},
        method=method,
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers.items()), exc.read()


def sse(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) pairs of a server-sent event stream."""
    found: list[tuple[str, dict[str, Any]]] = []
    for block in raw.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in lines:
            found.append((lines.get("event", ""), json.loads(lines["data"])))
    return found


ASK = {"model": "claude-x", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
WRITE = ToolCall("Write", {"file_path": "/w/a.py", "content": "x = 1\n" * 5})


def test_anthropic_json_message_with_text_and_tool_use(model_server: ModelServer) -> None:
    model_server.script(Turn.calls(WRITE, text="Writing it.", usage=Usage(30, 9)))
    status, headers, raw = call(model_server, "/v1/messages", ASK)
    assert status == 200 and headers["content-type"] == "application/json"
    doc = json.loads(raw)
    assert (doc["type"], doc["role"], doc["model"]) == ("message", "assistant", "claude-x")
    assert doc["stop_reason"] == "tool_use"
    text, tool = doc["content"]
    assert text == {"type": "text", "text": "Writing it."}
    assert tool["type"] == "tool_use" and tool["name"] == "Write"
    assert tool["input"] == WRITE.arguments and tool["id"].startswith("toolu_")
    assert doc["usage"]["input_tokens"] == 30 and doc["usage"]["output_tokens"] == 9
    assert model_server.completions[0].headers["x-api-key"] == "k"


def test_anthropic_stream_follows_the_documented_event_sequence(model_server: ModelServer) -> None:
    model_server.script(Turn.calls(WRITE, text="A longer reply, cut in pieces."))
    status, headers, raw = call(model_server, "/v1/messages", {**ASK, "stream": True})
    assert status == 200 and headers["content-type"] == "text/event-stream"
    events = sse(raw)
    names = [name for name, _ in events]
    assert all(name == data["type"] for name, data in events)
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 2
    deltas = [d["delta"] for n, d in events if n == "content_block_delta"]
    text = "".join(d["text"] for d in deltas if d["type"] == "text_delta")
    arguments = "".join(d["partial_json"] for d in deltas if d["type"] == "input_json_delta")
    assert text == "A longer reply, cut in pieces."
    assert json.loads(arguments) == WRITE.arguments
    assert len([d for d in deltas if d["type"] == "input_json_delta"]) > 1
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    final = next(d for n, d in events if n == "message_delta")
    assert final["delta"]["stop_reason"] == "tool_use"
    # message_start counts 1 output token; message_delta has the message's final counts.
    assert start["usage"]["output_tokens"] == 1
    assert final["usage"] == {
        "input_tokens": 100,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 20,
    }


@pytest.mark.parametrize(
    ("turn", "status", "kind"),
    [
        (Turn.rate_limited(retry_after=3, reset="1m"), 429, "rate_limit_error"),
        (Turn.overloaded(), 529, "overloaded_error"),
        (Turn.server_error(), 500, "api_error"),
        (Turn.context_exceeded(), 400, "invalid_request_error"),
    ],
)
def test_anthropic_errors(model_server: ModelServer, turn: Turn, status: int, kind: str) -> None:
    model_server.script(turn)
    got, headers, raw = call(model_server, "/v1/messages", ASK)
    doc = json.loads(raw)
    assert got == status and doc["type"] == "error" and doc["error"]["type"] == kind
    if status == 429:
        assert headers["retry-after"] == "3"
        assert headers["anthropic-ratelimit-requests-remaining"] == "0"
        assert headers["anthropic-ratelimit-requests-reset"].endswith("Z")
    if status == 400:
        assert doc["error"]["message"].startswith("prompt is too long")


RESPONSES_ASK = {"model": "m-1", "input": "hi"}


def client(server: ModelServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)


def test_responses_json_through_the_openai_sdk(model_server: ModelServer) -> None:
    model_server.script(Turn.reply("hello there", usage=Usage(12, 3)))
    response = client(model_server).responses.create(model="m-1", input="hi")
    assert response.output_text == "hello there"
    assert response.usage is not None and response.usage.total_tokens == 15
    assert model_server.completions[0].path == "/v1/responses"


def test_responses_stream_through_the_openai_sdk(model_server: ModelServer) -> None:
    shell = ToolCall("exec_command", {"cmd": "echo hi > a.txt && cat a.txt"})
    model_server.script(Turn.calls(shell, text="Running it."))
    stream = client(model_server).responses.create(model="m-1", input="hi", stream=True)
    events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" in kinds
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert isinstance(events[-1], ResponseCompletedEvent)
    done = events[-1].response
    message, function = done.output
    assert message.type == "message" and function.type == "function_call"
    assert function.name == "exec_command" and json.loads(function.arguments) == shell.arguments
    pieces = [e.delta for e in events if isinstance(e, ResponseFunctionCallArgumentsDeltaEvent)]
    assert "".join(pieces) == function.arguments


def test_responses_call_a_custom_tool_as_the_request_declared_it(
    model_server: ModelServer,
) -> None:
    patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"
    model_server.script(Turn.call("apply_patch", {"input": patch}))
    tools = [{"type": "custom", "name": "apply_patch", "description": "patch files"}]
    status, _, raw = call(model_server, "/v1/responses", {**RESPONSES_ASK, "tools": tools})
    [item] = json.loads(raw)["output"]
    assert status == 200
    assert (item["type"], item["name"], item["input"]) == ("custom_tool_call", "apply_patch", patch)


def test_responses_errors_are_openai_errors(model_server: ModelServer) -> None:
    model_server.script(Turn.rate_limited(retry_after=2))
    with pytest.raises(openai.RateLimitError) as raised:
        client(model_server).responses.create(model="m-1", input="hi")
    assert raised.value.response.headers["retry-after"] == "2"


def test_probe_model_list_and_a_provider_that_keeps_refusing() -> None:
    with ModelServer(when_exhausted=Turn.rate_limited()) as server:
        status, _, raw = call(server, "/", method="HEAD")
        assert status == 200 and raw == b""
        status, _, raw = call(server, "/v1/models", method="GET")
        [model] = json.loads(raw)["data"]
        assert model["id"] == model["display_name"] == "scripted-model"
        for _ in range(3):
            assert call(server, "/v1/messages", ASK)[0] == 429
        assert [r.method for r in server.requests] == ["HEAD", "GET", "POST", "POST", "POST"]
