"""The scripted model server answers real HTTP the way an OpenAI-compatible provider does."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from typing import Any

import openai
import pytest
from support.model_server import ModelServer, RecordedRequest, ToolCall, Turn, Usage


def post(server: ModelServer, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "authorization": "Bearer k"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers.items()), exc.read()


def sse_data(raw: bytes) -> list[str]:
    return [line[6:] for line in raw.decode().splitlines() if line.startswith("data: ")]


ASK = {"model": "m-1", "messages": [{"role": "user", "content": "hi"}]}


def test_non_streaming_text_with_usage_and_the_request_recorded(model_server: ModelServer) -> None:
    model_server.script(Turn.reply("hello", usage=Usage(11, 7)))
    status, headers, raw = post(model_server, ASK)
    assert status == 200
    assert headers["content-type"] == "application/json"
    doc = json.loads(raw)
    assert doc["object"] == "chat.completion"
    assert doc["model"] == "m-1"
    assert doc["choices"][0]["message"] == {
        "role": "assistant",
        "content": "hello",
        "refusal": None,
    }
    assert doc["choices"][0]["finish_reason"] == "stop"
    assert doc["usage"] == {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    [seen] = model_server.requests
    assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
    assert seen.headers["authorization"] == "Bearer k"
    assert seen.body == ASK
    assert seen.messages == ASK["messages"]


def test_non_streaming_tool_calls(model_server: ModelServer) -> None:
    model_server.script(Turn.calls(ToolCall("a", {"x": 1}), ToolCall("b", "{broken")))
    _, _, raw = post(model_server, ASK)
    choice = json.loads(raw)["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    calls = choice["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["a", "b"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"x": 1}
    assert calls[1]["function"]["arguments"] == "{broken"
    assert len({c["id"] for c in calls}) == 2


def test_streaming_sends_chunks_tool_call_pieces_usage_and_done(model_server: ModelServer) -> None:
    content = "x" * 50
    model_server.script(Turn.call("write_file", {"path": "a.txt", "content": content}, text="ok"))
    body = {**ASK, "stream": True, "stream_options": {"include_usage": True}}
    status, headers, raw = post(model_server, body)
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    data = sse_data(raw)
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    text = "".join(d.get("content") or "" for d in deltas)
    pieces = [tc for d in deltas for tc in d.get("tool_calls", [])]
    assert text == "ok"
    assert pieces[0]["function"]["name"] == "write_file"
    assert len(pieces) > 2  # the arguments arrive in several pieces
    joined = "".join(p["function"]["arguments"] for p in pieces)
    assert json.loads(joined) == {"path": "a.txt", "content": content}
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "tool_calls"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["total_tokens"] == 120


def test_streaming_without_include_usage_has_no_usage_chunk(model_server: ModelServer) -> None:
    model_server.script(Turn.reply("hello"))
    _, _, raw = post(model_server, {**ASK, "stream": True})
    chunks = [json.loads(d) for d in sse_data(raw)[:-1]]
    assert all("usage" not in c for c in chunks)


def test_the_openai_sdk_reads_both_forms(model_server: ModelServer) -> None:
    model_server.script(Turn.call("f", {"k": "v" * 40}), Turn.call("f", {"k": "w"}))
    client = openai.OpenAI(api_key="k", base_url=model_server.base_url, max_retries=0)
    stream = client.chat.completions.create(model="m", messages=[], stream=True)
    arguments = "".join(
        tc.function.arguments or ""
        for chunk in stream
        for choice in chunk.choices
        for tc in choice.delta.tool_calls or []
        if tc.function
    )
    assert json.loads(arguments) == {"k": "v" * 40}
    reply = client.chat.completions.create(model="m", messages=[])
    call = (reply.choices[0].message.tool_calls or [])[0]
    assert call.type == "function"
    assert json.loads(call.function.arguments) == {"k": "w"}
    assert reply.usage is not None
    assert reply.usage.total_tokens == 120


def test_rate_limit_answer(model_server: ModelServer) -> None:
    model_server.script(Turn.rate_limited(retry_after=3, reset="1m30s"))
    status, headers, raw = post(model_server, ASK)
    assert status == 429
    assert headers["retry-after"] == "3"
    assert headers["x-ratelimit-reset-requests"] == "1m30s"
    assert json.loads(raw)["error"]["code"] == "rate_limit_exceeded"


def test_context_and_server_errors(model_server: ModelServer) -> None:
    model_server.script(Turn.context_exceeded(), Turn.server_error())
    status, _, raw = post(model_server, ASK)
    assert status == 400
    error = json.loads(raw)["error"]
    assert error["code"] == "context_length_exceeded"
    assert error["type"] == "invalid_request_error"
    assert "maximum context length" in error["message"]
    status, _, raw = post(model_server, ASK)
    assert status == 500
    assert json.loads(raw)["error"]["type"] == "server_error"


def test_an_exhausted_script_answers_500(model_server: ModelServer) -> None:
    model_server.script(Turn.reply("one"))
    post(model_server, ASK)
    status, _, raw = post(model_server, ASK)
    assert status == 500
    assert "script exhausted" in json.loads(raw)["error"]["message"]
    assert model_server.remaining == 0
    assert len(model_server.completions) == 2


def test_a_turn_can_be_computed_from_the_request(model_server: ModelServer) -> None:
    def echo(request: RecordedRequest) -> Turn:
        return Turn.reply(str(request.messages[-1]["content"]).upper())

    model_server.script(echo)
    _, _, raw = post(model_server, ASK)
    assert json.loads(raw)["choices"][0]["message"]["content"] == "HI"


def test_models_listing_and_unknown_routes(model_server: ModelServer) -> None:
    with urllib.request.urlopen(f"{model_server.base_url}/models", timeout=10) as response:
        doc = json.loads(response.read())
    assert [m["id"] for m in doc["data"]] == ["scripted-model"]
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{model_server.url}/v2/nothing", timeout=10)
    assert caught.value.code == 404
    assert model_server.completions == []
    assert [r.path for r in model_server.requests] == ["/v1/models", "/v2/nothing"]


def test_the_server_counts_what_its_sent_answers_reported(model_server: ModelServer) -> None:
    loop = Turn.call("list_files", {"path": "."}, usage=Usage(30, 7, cost=0.25))
    model_server.when_exhausted = loop
    model_server.script(Turn.reply("a", usage=Usage(11, 2)), Turn.server_error())
    post(model_server, ASK)
    post(model_server, ASK)  # an error reports no usage
    for _ in range(3):  # the loop never ends
        _, _, raw = post(model_server, ASK)
        assert json.loads(raw)["usage"]["cost"] == 0.25
    post(model_server, {**ASK, "stream": True})  # no include_usage: the client saw no usage
    post(model_server, {**ASK, "stream": True, "stream_options": {"include_usage": True}})
    # An answer is counted once it is sent whole: the server's thread may still be ending the
    # stream the client has already read.
    deadline = time.monotonic() + 5
    while model_server.handed_out.answers < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    handed = model_server.handed_out
    assert (handed.answers, handed.tokens_in, handed.tokens_out) == (5, 11 + 4 * 30, 2 + 4 * 7)
    assert handed.tokens == 13 + 4 * 37
    assert handed.cost is None and handed.priced_cost == 1.0 and handed.unpriced == 1


def test_a_held_answer_is_not_handed_to_a_client_that_left(model_server: ModelServer) -> None:
    model_server.when_exhausted = Turn.reply("x", usage=Usage(5, 5))
    gate = model_server.hold(2)
    post(model_server, ASK)
    raw = json.dumps(ASK).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"content-length: {len(raw)}\r\n\r\n"
    ).encode()
    host, port = model_server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as client:
        client.sendall(head + raw)
        assert gate.wait(10)
    gate.open()  # the client is gone: the answer is dropped, not counted
    deadline = time.monotonic() + 10
    while model_server.dropped == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert model_server.dropped == 1
    assert model_server.handed_out.answers == 1 and model_server.handed_out.tokens == 10
