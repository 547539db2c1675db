"""The API-neutral script of the model server: turns, tool calls, errors, recorded requests.

A test writes :class:`Turn` values; a :class:`Dialect` renders each one in one provider's wire
format. Keeping the script neutral is what lets one server speak several APIs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

DEFAULT_MODEL = "scripted-model"
CREATED = 1_700_000_000  # a fixed timestamp keeps responses reproducible
PIECE = 16  # streamed text and arguments arrive in pieces this long, so clients must join them


@dataclass(frozen=True)
class ToolCall:
    """A scripted tool call; ``arguments`` as a mapping, or as raw (even broken) JSON text."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(frozen=True)
class Usage:
    """What one answer reports it spent. ``cost``: a price in US dollars, as OpenRouter and
    LiteLLM report it (``usage.cost``, Chat Completions only); None sends no cost."""

    prompt_tokens: int = 100
    completion_tokens: int = 20
    cost: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class HttpError:
    """A scripted failure in API-neutral terms; each dialect renders its own body and headers.

    ``kind``: ``rate_limit``, ``usage_limit``, ``server``, ``overloaded``, ``auth``,
    ``context_length`` or ``other``.
    ``reset`` uses OpenAI's ``x-ratelimit-reset-*`` duration format (``"7s"``, ``"1m30s"``).
    """

    status: int
    kind: str
    message: str
    retry_after: float | None = None
    reset: str | None = None


@dataclass(frozen=True)
class Turn:
    """One scripted model answer: text, tool calls, or an HTTP error."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    error: HttpError | None = None
    usage: Usage = field(default_factory=Usage)
    delay_seconds: float = 0.0

    @classmethod
    def reply(cls, text: str, *, usage: Usage | None = None) -> Turn:
        return cls(text=text, usage=usage or Usage())

    @classmethod
    def call(cls, name: str, arguments: Mapping[str, Any] | str | None = None, **kw: Any) -> Turn:
        """One tool call: ``Turn.call("write_file", {"path": "a.py", "content": "x"})``."""
        return cls.calls(ToolCall(name, {} if arguments is None else arguments), **kw)

    @classmethod
    def calls(cls, *calls: ToolCall, text: str | None = None, usage: Usage | None = None) -> Turn:
        return cls(text=text, tool_calls=tuple(calls), usage=usage or Usage())

    @classmethod
    def rate_limited(
        cls, retry_after: float | None = 7, reset: str | None = "7s", *, message: str = ""
    ) -> Turn:
        text = message or "Rate limit reached for requests. Please try again later."
        return cls(error=HttpError(429, "rate_limit", text, retry_after, reset))

    @classmethod
    def usage_limited(cls, message: str = "You exceeded your current quota.") -> Turn:
        return cls(error=HttpError(429, "usage_limit", message))

    @classmethod
    def server_error(cls, message: str = "The server had an error.", status: int = 500) -> Turn:
        return cls(error=HttpError(status, "server", message))

    @classmethod
    def overloaded(cls, message: str = "Overloaded") -> Turn:
        """Anthropic's 529; other dialects render it as a 503."""
        return cls(error=HttpError(529, "overloaded", message))

    @classmethod
    def context_exceeded(cls, limit: int = 8192) -> Turn:
        message = (
            f"This model's maximum context length is {limit} tokens. However, your messages "
            f"resulted in {limit * 2} tokens. Please reduce the length of the messages."
        )
        return cls(error=HttpError(400, "context_length", message))


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str  # without the query string
    headers: Mapping[str, str]  # names lower-cased
    body: Any  # the parsed JSON, or None when the body was empty or not JSON
    raw: bytes

    @property
    def messages(self) -> list[dict[str, Any]]:
        found = self.body.get("messages") if isinstance(self.body, dict) else None
        return list(found) if isinstance(found, list) else []


ScriptEntry = Turn | Callable[[RecordedRequest], Turn]


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    events: tuple[bytes, ...] | None = None  # server-sent events, each sent and flushed alone
    usage: Usage | None = None  # the usage this answer reports to its client, if it does


def json_response(status: int, doc: Any, headers: Mapping[str, str] | None = None) -> Response:
    merged = {"content-type": "application/json", **(headers or {})}
    return Response(status, json.dumps(doc).encode(), merged)


def pieces(text: str, size: int = PIECE) -> Iterator[str]:
    """``text`` cut into streaming pieces."""
    for start in range(0, len(text), size):
        yield text[start : start + size]


def sse_event(data: Any, event: str | None = None) -> bytes:
    """One server-sent event; ``data`` is JSON-encoded unless it is already a string."""
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


class Dialect(Protocol):
    """One provider API: the POST paths it serves and how it renders turns and errors."""

    paths: tuple[str, ...]

    def render(self, turn: Turn, request: RecordedRequest, seq: int) -> Response: ...

    def render_error(self, error: HttpError, request: RecordedRequest) -> Response: ...
