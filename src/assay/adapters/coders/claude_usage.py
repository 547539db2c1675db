"""claude's usage as its ``stream-json`` reports it, read as it arrives (pure: text in, figures
out; see :mod:`assay.adapters.coders.usage_read`).

What claude 2.1.332 prints (checked against the real program, tests/e2e/interop):

- Every ``assistant`` event carries its API message's ``usage``; one message can come as
  several events (one per content block) with the same ``id``. Its ``output_tokens`` is the
  count when the message started streaming (1), so these events alone undercount output.
- With ``--include-partial-messages``, ``stream_event`` lines carry the raw API stream events:
  ``message_start`` (the message's ``id``, ``model`` and ``usage``, output 1), content block
  events, then ``message_delta``, whose ``usage`` holds the message's cumulative counts: its
  final output count, printed after the message's ``assistant`` events. Each line names its
  message in ``api_message_id``; a ``message_delta`` without one belongs to the message the
  same stream (``session_id``, ``parent_tool_use_id``) last started.
- The final ``result`` event gives the session's ``usage``, ``modelUsage`` (per model) and
  ``total_cost_usd``, the only cost claude prints. A ``result`` of a run stopped by
  ``--max-budget-usd`` leaves the last call out of its ``usage`` (not of ``modelUsage`` nor
  the cost), so each count is the largest of the three. A claude that is stopped (a budget,
  a timeout, its host gone) prints no ``result``: its messages' events are all there is.

Each message is counted once, at the largest figures any of its events gave: the
``message_delta`` where claude printed one, else the ``assistant`` events (older output).
"""

from __future__ import annotations

from typing import Any

from assay.adapters.coders.usage_read import (
    LineReader,
    count_sum,
    json_count,
    json_dict,
    json_name,
    json_object,
    non_negative_float,
)
from assay.core.usage import UsageFigures

_CLAUDE_IN = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
_MODEL_IN = ("inputTokens", "cacheCreationInputTokens", "cacheReadInputTokens")
SYNTHETIC = "<synthetic>"  # claude's model name on an API error it reports as a message
# The bulk of a stream with partial messages, as claude prints it: content block events, with
# no usage in them, skipped before they are parsed. (A line printed otherwise is parsed.)
STREAM_EVENT = '{"type":"stream_event"'
CONTENT_EVENT = STREAM_EVENT + ',"event":{"type":"content_block_'


class ClaudeUsage(LineReader):
    """claude's ``stream-json`` on stdout."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: dict[str, tuple[int, int]] = {}
        self.calls: set[str] = set()
        self.model: str | None = None
        self.result: UsageFigures | None = None
        # The message each stream (session, parent tool call) last started; the streams
        # with a message under way (started, not stopped).
        self._started: dict[tuple[str | None, str | None], str] = {}
        self._open: set[tuple[str | None, str | None]] = set()

    def line(self, text: str) -> None:
        if text.startswith(CONTENT_EVENT):
            return
        event = json_object(text)
        if event is None:
            return
        kind = event.get("type")
        if kind == "stream_event":
            self._stream_event(event)
        elif kind == "assistant":
            message = json_dict(event.get("message"))
            key = _ident(message.get("id")) or f"#{len(self.messages)}"
            self._count(key, message.get("usage"), json_name(message.get("model")))
        elif kind == "result":
            self._open.clear()
            self._result(event)
        elif kind == "system" and event.get("subtype") == "init":
            self.model = self.model or json_name(event.get("model"))

    def _stream_event(self, line: dict[str, Any]) -> None:
        event = json_dict(line.get("event"))
        stream = (_ident(line.get("session_id")), _ident(line.get("parent_tool_use_id")))
        kind = event.get("type")
        if kind == "message_start":
            message = json_dict(event.get("message"))
            named = _ident(message.get("id")) or _ident(line.get("api_message_id"))
            key = named or f"#{len(self.messages)}"
            self._started[stream] = key
            self._open.add(stream)
            self._count(key, message.get("usage"), json_name(message.get("model")))
        elif kind == "message_delta":
            ended = _ident(line.get("api_message_id")) or self._started.get(stream)
            if ended is not None:  # no message started: nothing to add its output to
                self._count(ended, event.get("usage"), None)
        elif kind == "message_stop":
            self._open.discard(stream)

    def _count(self, key: str, usage: object, model: str | None) -> None:
        tokens_in, tokens_out = count_sum(usage, _CLAUDE_IN), json_count(usage, "output_tokens")
        if tokens_in is None and tokens_out is None:
            return
        seen_in, seen_out = self.messages.get(key, (0, 0))
        self.messages[key] = (max(seen_in, tokens_in or 0), max(seen_out, tokens_out or 0))
        if model != SYNTHETIC:  # an API error claude wrote itself: no call was made
            self.calls.add(key)
            self.model = model or self.model

    def _result(self, event: dict[str, Any]) -> None:
        usage = event.get("usage")
        tokens_in, tokens_out = count_sum(usage, _CLAUDE_IN), json_count(usage, "output_tokens")
        by_model = json_dict(event.get("modelUsage"))
        models = [json_dict(v) for v in by_model.values()]
        models_in = sum(count_sum(m, _MODEL_IN) or 0 for m in models)
        models_out = sum(json_count(m, "outputTokens") or 0 for m in models)
        self.result = UsageFigures(
            tokens_in=max(tokens_in or 0, models_in),
            tokens_out=max(tokens_out or 0, models_out),
            cost_usd=non_negative_float(event.get("total_cost_usd")),
            model=json_name(next(iter(by_model))) if len(by_model) == 1 else None,
        )

    def settling(self) -> bool:
        """A message is under way: its output count comes with its end."""
        return bool(self._open)

    def figures(self) -> UsageFigures | None:
        if not self.messages and self.result is None:
            return None
        streamed = UsageFigures(
            tokens_in=sum(t[0] for t in self.messages.values()),
            tokens_out=sum(t[1] for t in self.messages.values()),
            model=self.model,
            calls=len(self.calls),
        )
        return streamed if self.result is None else streamed.at_least(self.result)


def _ident(value: object) -> str | None:
    """An id from JSON (a message's, a session's), bounded; None for anything else."""
    return value[:200] if isinstance(value, str) and value else None
