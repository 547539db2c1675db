"""The Anthropic Messages dialect of the model server (``POST /v1/messages``).

Format sources: https://docs.anthropic.com/en/api/messages (the message object, ``tool_use``
blocks, ``stop_reason``, ``usage``), https://docs.anthropic.com/en/api/messages-streaming (the
event sequence ``message_start``, ``content_block_start``, ``ping``, ``content_block_delta``
with ``text_delta`` / ``input_json_delta``, ``content_block_stop``, ``message_delta``,
``message_stop``; ``message_delta``'s ``usage`` holds the message's cumulative counts, input
and cache included, as the SDKs' ``MessageDeltaUsage`` type documents them),
https://docs.anthropic.com/en/api/errors (``{"type": "error", "error":
{"type": ..., "message": ...}}``, 429 ``rate_limit_error``, 529 ``overloaded_error``) and
https://docs.anthropic.com/en/api/rate-limits (``retry-after`` and the
``anthropic-ratelimit-*-reset`` RFC 3339 headers).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from support.script import (
    DEFAULT_MODEL,
    HttpError,
    RecordedRequest,
    Response,
    Turn,
    json_response,
    pieces,
    sse_event,
)

CONTEXT_LIMIT = 200_000


class AnthropicMessages:
    """Anthropic Messages, JSON and streamed (``stream: true``), with ``tool_use`` blocks."""

    paths: tuple[str, ...] = ("/v1/messages",)
    _types: Mapping[str, str] = {  # HttpError.kind -> error.type
        "rate_limit": "rate_limit_error",
        "usage_limit": "rate_limit_error",
        "context_length": "invalid_request_error",
        "server": "api_error",
        "overloaded": "overloaded_error",
        "auth": "authentication_error",
        "other": "invalid_request_error",
    }

    def render(self, turn: Turn, request: RecordedRequest, seq: int) -> Response:
        body = request.body if isinstance(request.body, dict) else {}
        model = str(body.get("model") or DEFAULT_MODEL)
        blocks: list[dict[str, Any]] = []
        if turn.text:
            blocks.append({"type": "text", "text": turn.text})
        for index, call in enumerate(turn.tool_calls):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id or f"toolu_{seq:04d}_{index}",
                    "name": call.name,
                    "input": _as_object(call.arguments),
                    "raw": call.arguments_json(),
                }
            )
        stop = "tool_use" if turn.tool_calls else "end_turn"
        usage = {
            "input_tokens": turn.usage.prompt_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": turn.usage.completion_tokens,
        }
        message = {
            "id": f"msg_{seq:04d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{k: v for k, v in b.items() if k != "raw"} for b in blocks],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        headers = {"request-id": f"req_{seq:04d}"}
        if not body.get("stream"):
            return replace(json_response(200, message, headers), usage=turn.usage)
        events = tuple(sse_event(e, e["type"]) for e in _events(message, blocks, stop, usage))
        return Response(200, headers=headers, events=events, usage=turn.usage)

    def render_error(self, error: HttpError, request: RecordedRequest) -> Response:
        kind = self._types.get(error.kind, self._types["other"])
        message = error.message
        if error.kind == "context_length":
            # Anthropic's own wording, which clients match on.
            message = f"prompt is too long: {CONTEXT_LIMIT + 1234} tokens > {CONTEXT_LIMIT} maximum"
        headers = {"request-id": "req_error", "x-should-retry": "false"}
        if error.kind in ("rate_limit", "usage_limit", "server", "overloaded"):
            headers["x-should-retry"] = "true"
        if error.retry_after is not None:
            headers["retry-after"] = f"{error.retry_after:g}"
        if error.reset is not None:
            at = datetime.now(UTC) + timedelta(seconds=_seconds(error.reset))
            stamp = at.replace(microsecond=0).isoformat().replace("+00:00", "Z")
            for scope in ("requests", "tokens", "input-tokens", "output-tokens"):
                headers[f"anthropic-ratelimit-{scope}-reset"] = stamp
            headers["anthropic-ratelimit-requests-remaining"] = "0"
        doc = {"type": "error", "error": {"type": kind, "message": message}}
        return json_response(error.status, doc, headers)


def _events(
    message: dict[str, Any], blocks: list[dict[str, Any]], stop: str, usage: dict[str, int]
) -> Iterator[dict[str, Any]]:
    start_usage = {**usage, "output_tokens": 1}
    yield {
        "type": "message_start",
        "message": {**message, "content": [], "stop_reason": None, "usage": start_usage},
    }
    yield {"type": "ping"}
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            yield {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            }
            for piece in pieces(block["text"]):
                delta = {"type": "text_delta", "text": piece}
                yield {"type": "content_block_delta", "index": index, "delta": delta}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            yield {"type": "content_block_start", "index": index, "content_block": start}
            for piece in pieces(block["raw"]):
                delta = {"type": "input_json_delta", "partial_json": piece}
                yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    # The message's usage so far, every count cumulative (the API's ``MessageDeltaUsage``):
    # the only place a stream gives its final output count.
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": dict(usage),
    }
    yield {"type": "message_stop"}


def _as_object(arguments: Mapping[str, Any] | str) -> Any:
    if not isinstance(arguments, str):
        return dict(arguments)
    try:
        return json.loads(arguments)
    except ValueError:
        return {}


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _seconds(duration: str) -> float:
    """OpenAI's reset duration (``"7s"``, ``"1m30s"``, ``"250ms"``) in seconds."""
    return sum(float(n) * _UNIT[u] for n, u in _DURATION.findall(duration))
