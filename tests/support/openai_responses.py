"""The OpenAI Responses dialect of the model server (``POST /v1/responses``).

Format sources: https://platform.openai.com/docs/api-reference/responses/object (the response
object, ``message`` / ``function_call`` / ``custom_tool_call`` output items, ``usage`` with
``input_tokens_details`` and ``output_tokens_details``) and
https://platform.openai.com/docs/api-reference/responses-streaming (``response.created``,
``response.in_progress``, ``response.output_item.added``, ``response.content_part.added``,
``response.output_text.delta`` / ``.done``, ``response.function_call_arguments.delta`` /
``.done``, ``response.custom_tool_call_input.delta`` / ``.done``,
``response.output_item.done``, ``response.completed``). Codex reads them in openai/codex
``codex-rs/codex-api/src/sse/responses.rs``. Errors are the same JSON bodies as Chat
Completions.

A scripted tool call is rendered as the kind of tool the request declared under that name: a
``custom`` (freeform) tool such as codex's ``apply_patch`` gets a ``custom_tool_call`` whose
``input`` is the ``input`` argument (or the raw argument text); any other a ``function_call``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from support.openai_chat import OpenAIChat
from support.script import (
    CREATED,
    DEFAULT_MODEL,
    HttpError,
    RecordedRequest,
    Response,
    ToolCall,
    Turn,
    json_response,
    pieces,
    sse_event,
)


class OpenAIResponses:
    """OpenAI Responses, JSON and streamed (``stream: true``), with function and custom calls."""

    paths: tuple[str, ...] = ("/v1/responses",)

    def render(self, turn: Turn, request: RecordedRequest, seq: int) -> Response:
        body = request.body if isinstance(request.body, dict) else {}
        model = str(body.get("model") or DEFAULT_MODEL)
        custom = _custom_tools(body)
        items: list[dict[str, Any]] = []
        if turn.text is not None:
            content = [{"type": "output_text", "text": turn.text, "annotations": []}]
            items.append(
                {
                    "id": f"msg_{seq:04d}",
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": content,
                }
            )
        for index, call in enumerate(turn.tool_calls):
            items.append(_call_item(call, seq, index, call.name in custom))
        usage = {
            "input_tokens": turn.usage.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": turn.usage.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": turn.usage.total_tokens,
        }
        done = {
            "id": f"resp_{seq:04d}",
            "object": "response",
            "created_at": CREATED,
            "status": "completed",
            "model": model,
            "output": items,
            "parallel_tool_calls": True,
            "usage": usage,
            "error": None,
            "incomplete_details": None,
        }
        if not body.get("stream"):
            return replace(json_response(200, done), usage=turn.usage)
        return Response(200, events=tuple(_numbered(_events(done, items))), usage=turn.usage)

    def render_error(self, error: HttpError, request: RecordedRequest) -> Response:
        return OpenAIChat().render_error(error, request)


def _custom_tools(body: dict[str, Any]) -> set[str]:
    tools = body.get("tools")
    return {
        str(tool.get("name"))
        for tool in (tools if isinstance(tools, list) else [])
        if isinstance(tool, dict) and tool.get("type") == "custom"
    }


def _call_item(call: ToolCall, seq: int, index: int, custom: bool) -> dict[str, Any]:
    call_id = call.id or f"call_{seq:04d}_{index}"
    if custom:
        args = call.arguments
        text = args if isinstance(args, str) else str(args.get("input", call.arguments_json()))
        return {
            "id": f"ctc_{seq:04d}_{index}",
            "type": "custom_tool_call",
            "status": "completed",
            "call_id": call_id,
            "name": call.name,
            "input": text,
        }
    return {
        "id": f"fc_{seq:04d}_{index}",
        "type": "function_call",
        "status": "completed",
        "call_id": call_id,
        "name": call.name,
        "arguments": call.arguments_json(),
    }


def _events(done: dict[str, Any], items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    started = {**done, "status": "in_progress", "output": [], "usage": None}
    yield {"type": "response.created", "response": started}
    yield {"type": "response.in_progress", "response": started}
    for index, item in enumerate(items):
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "status": "in_progress", "content": []},
            }
            part = {"type": "output_text", "text": "", "annotations": []}
            yield {"type": "response.content_part.added", **where, "content_index": 0, "part": part}
            for piece in pieces(text):
                yield {
                    "type": "response.output_text.delta",
                    **where,
                    "content_index": 0,
                    "delta": piece,
                }
            yield {"type": "response.output_text.done", **where, "content_index": 0, "text": text}
            yield {
                "type": "response.content_part.done",
                **where,
                "content_index": 0,
                "part": {**part, "text": text},
            }
        else:
            field = "input" if item["type"] == "custom_tool_call" else "arguments"
            kind = (
                "custom_tool_call_input"
                if item["type"] == "custom_tool_call"
                else "function_call_arguments"
            )
            yield {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "status": "in_progress", field: ""},
            }
            for piece in pieces(item[field]):
                yield {"type": f"response.{kind}.delta", **where, "delta": piece}
            yield {"type": f"response.{kind}.done", **where, field: item[field]}
        yield {"type": "response.output_item.done", "output_index": index, "item": item}
    yield {"type": "response.completed", "response": done}


def _numbered(events: Iterator[dict[str, Any]]) -> Iterator[bytes]:
    for number, event in enumerate(events):
        yield sse_event({**event, "sequence_number": number}, event["type"])
