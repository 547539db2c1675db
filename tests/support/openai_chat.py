"""The OpenAI Chat Completions dialect of the model server."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from support.script import (
    CREATED,
    DEFAULT_MODEL,
    HttpError,
    RecordedRequest,
    Response,
    Turn,
    json_response,
    pieces,
    sse_event,
)


class OpenAIChat:
    """OpenAI Chat Completions, JSON and streamed (``stream: true``), with tool calls."""

    paths: tuple[str, ...] = ("/v1/chat/completions",)
    _codes: Mapping[str, tuple[str, str]] = {  # kind -> (error.type, error.code)
        "rate_limit": ("requests", "rate_limit_exceeded"),
        "usage_limit": ("insufficient_quota", "insufficient_quota"),
        "context_length": ("invalid_request_error", "context_length_exceeded"),
        "server": ("server_error", "server_error"),
        "overloaded": ("server_error", "server_error"),
        "auth": ("invalid_request_error", "invalid_api_key"),
        "other": ("invalid_request_error", "invalid_request"),
    }

    def render(self, turn: Turn, request: RecordedRequest, seq: int) -> Response:
        body = request.body if isinstance(request.body, dict) else {}
        model = str(body.get("model") or DEFAULT_MODEL)
        calls = [
            {
                "id": call.id or f"call_{seq}_{index}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json()},
            }
            for index, call in enumerate(turn.tool_calls)
        ]
        finish = "tool_calls" if calls else "stop"
        usage: dict[str, Any] = {
            "prompt_tokens": turn.usage.prompt_tokens,
            "completion_tokens": turn.usage.completion_tokens,
            "total_tokens": turn.usage.total_tokens,
        }
        if turn.usage.cost is not None:
            usage["cost"] = turn.usage.cost
        head = {"id": f"chatcmpl-{seq}", "created": CREATED, "model": model}
        if body.get("stream"):
            options = body.get("stream_options")
            with_usage = isinstance(options, dict) and bool(options.get("include_usage"))
            chunks = self._chunks(head, turn.text, calls, finish, usage if with_usage else None)
            events = (*map(sse_event, chunks), sse_event("[DONE]"))
            return Response(200, events=events, usage=turn.usage if with_usage else None)
        message: dict[str, Any] = {"role": "assistant", "content": turn.text, "refusal": None}
        if calls:
            message["tool_calls"] = calls
        choice = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
        doc = {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
        return replace(json_response(200, doc), usage=turn.usage)

    @staticmethod
    def _chunks(
        head: dict[str, Any],
        text: str | None,
        calls: list[dict[str, Any]],
        finish: str,
        usage: dict[str, Any] | None,
    ) -> Iterator[dict[str, Any]]:
        base = {**head, "object": "chat.completion.chunk"}

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
            return {**base, "choices": [choice]}

        yield chunk({"role": "assistant", "content": ""})
        for piece in pieces(text or ""):
            yield chunk({"content": piece})
        for index, call in enumerate(calls):
            function = {"name": call["function"]["name"], "arguments": ""}
            yield chunk(
                {
                    "tool_calls": [
                        {"index": index, "id": call["id"], "type": "function", "function": function}
                    ]
                }
            )
            for piece in pieces(call["function"]["arguments"]):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield chunk({}, finish)
        if usage is not None:
            yield {**base, "choices": [], "usage": usage}

    def render_error(self, error: HttpError, request: RecordedRequest) -> Response:
        kind, code = self._codes.get(error.kind, self._codes["other"])
        headers: dict[str, str] = {}
        if error.retry_after is not None:
            headers["retry-after"] = f"{error.retry_after:g}"
        if error.reset is not None:
            headers["x-ratelimit-reset-requests"] = error.reset
            headers["x-ratelimit-remaining-requests"] = "0"
        param = "messages" if error.kind == "context_length" else None
        doc = {"error": {"message": error.message, "type": kind, "param": param, "code": code}}
        status = 503 if error.kind == "overloaded" else error.status
        return json_response(status, doc, headers)
