"""A thin client for any OpenAI-compatible chat endpoint, speaking assay's failure vocabulary.

The ``llm`` coder and the judges share it. A provider fault (5xx, 529, a lost connection, a
timeout) is retried a few times with bounded exponential backoff, honouring ``Retry-After``,
within the caller's deadline; the error that finally surfaces says how many calls were made. A
rate limit (429) is never retried here: it must reach assay's policy, which refunds the attempt
and waits for the reset the provider gave. Every failure is mapped onto one :class:`LlmError`
kind.
httpx is imported lazily so commands that never talk to a model (``assay halt``) stay fast.
"""

from __future__ import annotations

import enum
import json
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

from assay.adapters.envpolicy import BASE_URL_ENV, DEFAULT_API_KEY_ENV
from assay.adapters.process import sleep_unless_stopped, wait_unless_stopped
from assay.adapters.stop_request import stopping_now
from assay.core.contract_rules import base_url_problem
from assay.core.quota import Quota
from assay.core.text import address_shown
from assay.core.usage import FIRST_CALL, UsageFigures, with_call

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_CONTEXT_MARKERS = ("context_length_exceeded", "maximum context length", "context window")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class FailureKind(enum.Enum):
    QUOTA = "quota"  # 429: a rate limit or usage limit, with a reset time when one was given
    PROVIDER = "provider"  # 5xx, connection lost, timeout, an unreadable answer
    CONTEXT = "context"  # the conversation no longer fits the model's context window
    CONFIG = "config"  # no key, no model, bad credentials, unknown model or endpoint
    REQUEST = "request"  # any other refusal of the request itself (4xx)


class LlmError(Exception):
    """A model call that did not produce an answer, classified for the policy."""

    def __init__(
        self,
        kind: FailureKind,
        detail: str,
        *,
        status: int | None = None,
        quota: Quota | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.status = status
        self.quota = quota
        self.retry_after = retry_after  # seconds the provider asked us to wait, if it said


class LlmStopped(LlmError):
    """The process is being stopped (SIGINT or SIGTERM): the call was given up, never retried."""

    def __init__(self, detail: str) -> None:
        super().__init__(FailureKind.PROVIDER, detail)


def _raise_if_stopped() -> None:
    why = stopping_now()
    if why is not None:
        raise LlmStopped(f"stopped by assay ({why}) before the model answered")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a provider fault is retried inside one model call.

    ``calls`` counts every request, the first included. The wait before call ``n + 1`` is the
    provider's ``Retry-After`` when it gave one, else ``base_seconds * 2 ** (n - 1)``; both are
    capped at ``cap_seconds``. No jitter: one client makes one request at a time, and a fixed
    schedule keeps tests deterministic.
    """

    calls: int = 3
    base_seconds: float = 1.0
    cap_seconds: float = 20.0

    def delay(self, call: int, retry_after: float | None) -> float:
        """Seconds to wait after failed call number ``call`` (1-based)."""
        if retry_after is not None:
            return max(0.0, min(retry_after, self.cap_seconds))
        return min(self.cap_seconds, self.base_seconds * 2.0 ** min(call - 1, 32))


DEFAULT_RETRY = RetryPolicy()


@dataclass(frozen=True)
class ToolCallRequest:
    """A tool call the model asked for; ``arguments`` is the raw JSON text it sent."""

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as an object; raises ValueError when they are not one."""
        loaded = json.loads(self.arguments or "{}")
        if not isinstance(loaded, dict):
            raise ValueError(f"arguments must be a JSON object, got {type(loaded).__name__}")
        return loaded


@dataclass(frozen=True)
class ChatReply:
    text: str | None
    tool_calls: tuple[ToolCallRequest, ...]
    finish_reason: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None  # when the endpoint prices its answers (``usage.cost``)

    def as_message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation before the tool results."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        return message


@dataclass(frozen=True)
class Endpoint:
    model: str
    base_url: str | None  # None: api.openai.com
    api_key: str
    timeout: float


def resolve_endpoint(
    settings: Mapping[str, Any], environ: Mapping[str, str], *, timeout: float, role: str
) -> Endpoint:
    """The endpoint a contract block names: ``model``, ``base_url``, ``api_key_env``.

    ``base_url`` falls back to ``$OPENAI_BASE_URL``; the key is read from the variable
    ``api_key_env`` names (``OPENAI_API_KEY`` by default). A local server accepts any
    non-empty key. Raises ``LlmError(CONFIG)`` with a message that says what to set.
    """
    model = settings.get("model")
    if not isinstance(model, str) or not model:
        raise LlmError(FailureKind.CONFIG, f"the {role} needs `model:` in the contract")
    key_env = settings.get("api_key_env") or DEFAULT_API_KEY_ENV
    api_key = environ.get(str(key_env), "")
    if not api_key:
        raise LlmError(
            FailureKind.CONFIG,
            f"the {role} reads its API key from ${key_env}, which is not set; export it (any "
            "non-empty value for a local server) or name another variable with `api_key_env:`",
        )
    base_url = settings.get("base_url") or environ.get(BASE_URL_ENV) or None
    if (problem := base_url_problem(base_url)) is not None:  # the variable was never checked
        where = "`base_url:`" if settings.get("base_url") else f"${BASE_URL_ENV}"
        raise LlmError(FailureKind.CONFIG, f"the {role}'s endpoint {where} {problem}")
    return Endpoint(model=model, base_url=base_url, api_key=api_key, timeout=timeout)


def function_tool(
    name: str, description: str, properties: Mapping[str, Any], required: Sequence[str]
) -> dict[str, Any]:
    """A Chat Completions function tool whose arguments are exactly ``properties``."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": dict(properties),
                "required": list(required),
                "additionalProperties": False,
            },
        },
    }


class ChatClient:
    """One endpoint, one model; ``complete`` is one turn, its provider faults retried.

    Plain HTTP (httpx) rather than the ``openai`` SDK: the wire format is the documented
    Chat Completions JSON (https://platform.openai.com/docs/api-reference/chat/create), and
    the SDK's import alone costs ~0.4 s, paid by every run that calls a model. ``sleep`` and
    ``retry`` are injectable so tests need not wait.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        import httpx

        self.endpoint = endpoint
        self.retry = retry or DEFAULT_RETRY
        self._sleep = sleep or sleep_unless_stopped  # a backoff may last 20 s
        # Every answer the endpoint sent (and so billed), usable or not, retried or not.
        self.spent = FIRST_CALL
        self.on_spent: Callable[[UsageFigures], None] | None = None
        base = (endpoint.base_url or DEFAULT_BASE_URL).rstrip("/") + "/"
        self._http = httpx.Client(
            base_url=base,
            timeout=endpoint.timeout,
            headers={"Authorization": f"Bearer {endpoint.api_key}"},
        )

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> ChatReply:
        """Ask for one turn; raises :class:`LlmError` when there is no usable answer.

        A provider fault is retried by :attr:`retry` while the next call can still start
        before ``timeout`` runs out; the detail of the error that surfaces ends with how many
        calls were made ("..., 3 of 3 calls"). Any other failure surfaces at once.
        """
        wait = max(timeout, 1.0) if timeout is not None else self.endpoint.timeout
        deadline = time.monotonic() + wait
        calls = self.retry.calls
        call = 1
        while True:
            try:
                return self._complete_once(messages, tools, tool_choice, wait)
            except LlmError as exc:
                if exc.kind is not FailureKind.PROVIDER or isinstance(exc, LlmStopped):
                    raise
                delay = self.retry.delay(call, exc.retry_after)
                remaining = deadline - time.monotonic()
                if call >= calls or delay >= remaining:
                    raise LlmError(
                        exc.kind,
                        f"{exc.detail}, {call} of {calls} calls",
                        status=exc.status,
                        retry_after=exc.retry_after,
                    ) from exc
            self._sleep(delay)
            _raise_if_stopped()  # the wait was cut short by a stop: no retry
            call += 1
            wait = max(deadline - time.monotonic(), 1.0)

    def _post(self, options: dict[str, Any], wait: float) -> Any:
        """The request, its answer awaited in ticks so a stop request (SIGINT or SIGTERM) ends
        the wait at once: a model may take minutes to answer, and a call is no child process
        the stop could end. The call left behind ends by itself (its timeout, or an answer
        nobody reads); what it may have cost is counted as for a call that timed out."""
        answer: Future[Any] = Future()

        def call() -> None:
            try:
                answer.set_result(self._http.post("chat/completions", json=options, timeout=wait))
            except BaseException as exc:  # handed to the waiting thread
                answer.set_exception(exc)

        threading.Thread(target=call, name="assay-model-call", daemon=True).start()
        wait_unless_stopped([answer], math.inf)
        if not answer.done():  # a stop request ended the wait
            self._count({})  # the request went out: it may be billed
            _raise_if_stopped()
        return answer.result()

    def _complete_once(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        tool_choice: str | Mapping[str, Any] | None,
        wait: float,
    ) -> ChatReply:
        import httpx

        options: dict[str, Any] = {"model": self.endpoint.model, "messages": list(messages)}
        if tools:
            options["tools"] = list(tools)
        if tool_choice is not None:
            options["tool_choice"] = tool_choice
        try:
            response = self._post(options, wait)
        except httpx.HTTPError as exc:
            if isinstance(exc, httpx.ReadTimeout | httpx.ReadError | httpx.RemoteProtocolError):
                # The request went out whole: the provider may have answered it, and billed it.
                self._count({})
            where = address_shown(self.endpoint.base_url or DEFAULT_BASE_URL)
            what = f"cannot reach the model endpoint {where}"
            if isinstance(exc, httpx.TimeoutException):
                what = f"the model endpoint {where} timed out"
            raise LlmError(FailureKind.PROVIDER, f"{what}: {exc}") from exc
        try:
            body: Any = response.json()
        except ValueError:
            body = None
        if response.status_code >= 400:
            error = body.get("error") if isinstance(body, Mapping) else None
            message = ""
            if isinstance(error, Mapping):
                message = str(error.get("message") or "")
            elif isinstance(error, str):
                message = error
            raise classify_status(
                response.status_code,
                response.headers,
                error,
                message or response.text[:500] or response.reason_phrase,
            )
        if not isinstance(body, Mapping):
            self._count({})  # an answer came, cut or garbled: billed, at a cost it cannot say
            raise LlmError(FailureKind.PROVIDER, "unusable answer from the endpoint: not JSON")
        self._count(body)  # before it is judged usable: an unusable answer was billed too
        return _reply(body)

    def _count(self, body: Mapping[str, Any]) -> None:
        usage = body.get("usage")
        usage = usage if isinstance(usage, Mapping) else {}
        prompt = _count(usage.get("prompt_tokens"))
        completion = _count(usage.get("completion_tokens"))
        completion = max(completion, _count(usage.get("total_tokens")) - prompt)
        keys = ("prompt_tokens", "completion_tokens", "total_tokens")
        self.spent = with_call(
            self.spent,
            tokens_in=prompt,
            tokens_out=completion,
            cost_usd=_amount(usage.get("cost")),
            model=self.endpoint.model,
            counted=any(_is_count(usage.get(key)) for key in keys),
        )
        if self.on_spent is not None:
            self.on_spent(self.spent)


def _reply(response: Mapping[str, Any]) -> ChatReply:
    choices = response.get("choices") or []
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise LlmError(FailureKind.PROVIDER, "the endpoint answered without any choice")
    message = choices[0].get("message") or {}
    if not isinstance(message, Mapping):
        raise LlmError(FailureKind.PROVIDER, "the endpoint answered with no message object")
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not function.get("name"):
            continue
        ident = call.get("id") or f"call_{uuid.uuid4().hex[:12]}"
        arguments = function.get("arguments") or ""
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(ToolCallRequest(str(ident), str(function["name"]), arguments))
    usage = response.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    prompt = _count(usage.get("prompt_tokens"))
    completion = _count(usage.get("completion_tokens"))
    total = max(_count(usage.get("total_tokens")), prompt + completion)
    cost = usage.get("cost")
    content = message.get("content")
    return ChatReply(
        text=content if isinstance(content, str) else None,
        tool_calls=tuple(calls),
        finish_reason=choices[0].get("finish_reason"),
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total,
        cost_usd=_amount(cost),
    )


def _is_count(value: object) -> bool:
    """A usable token count: a finite number of at least 0 (never a bool or a string)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value >= 0


def _count(value: object) -> int:
    """A token count of an answer's usage (anything that is not one counts nothing)."""
    if not _is_count(value) or not isinstance(value, int | float):
        return 0
    return int(value)


def _amount(value: object) -> float | None:
    """A cost the endpoint gave (OpenRouter's and LiteLLM's ``usage.cost``), or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def classify_status(
    status: int,
    headers: Mapping[str, str],
    body: object,
    message: str,
    *,
    now: datetime | None = None,
) -> LlmError:
    """Map an HTTP error answer onto an :class:`LlmError` (``body`` is the ``error`` object)."""
    code = str(body.get("code") or "") if isinstance(body, Mapping) else ""
    detail = f"HTTP {status}: {message}"
    if status == 429:
        limit = "usage_limit" if code == "insufficient_quota" else "rate_limit"
        reset_at = reset_time(headers, now=now)
        quota = Quota(kind=limit, detail=detail, reset_at=reset_at)
        return LlmError(FailureKind.QUOTA, detail, status=status, quota=quota)
    lowered = f"{code} {message}".lower()
    if status == 413 or (status == 400 and any(m in lowered for m in _CONTEXT_MARKERS)):
        return LlmError(FailureKind.CONTEXT, detail, status=status)
    if status >= 500:
        wait = retry_after_seconds(headers, now=now)
        return LlmError(FailureKind.PROVIDER, detail, status=status, retry_after=wait)
    if status in (401, 403, 404):
        return LlmError(FailureKind.CONFIG, detail, status=status)
    return LlmError(FailureKind.REQUEST, detail, status=status)


def reset_time(headers: Mapping[str, str], *, now: datetime | None = None) -> datetime | None:
    """When a rate limit lifts, from the answer's headers; None when they do not say.

    ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date) are the server's explicit
    instruction and win; otherwise the later of OpenAI's ``x-ratelimit-reset-requests`` and
    ``x-ratelimit-reset-tokens`` (durations such as ``"1m30s"`` or ``"250ms"``).
    """
    now = now or datetime.now(UTC)
    lowered = {name.lower(): value for name, value in headers.items()}
    millis = _number(lowered.get("retry-after-ms"))
    if millis is not None:
        return now + timedelta(milliseconds=millis)
    retry_after = lowered.get("retry-after")
    if retry_after:
        seconds = _number(retry_after)
        if seconds is not None:
            return now + timedelta(seconds=seconds)
        try:
            when = parsedate_to_datetime(retry_after)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            return when if when.tzinfo else when.replace(tzinfo=UTC)
    delays = [
        _duration(lowered.get(name))
        for name in ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
    ]
    known = [d for d in delays if d is not None]
    return now + timedelta(seconds=max(known)) if known else None


def retry_after_seconds(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """The wait ``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms`` asks for."""
    now = now or datetime.now(UTC)
    lowered = {name.lower(): value for name, value in headers.items()}
    if "retry-after-ms" not in lowered and "retry-after" not in lowered:
        return None
    when = reset_time({k: v for k, v in lowered.items() if k.startswith("retry-after")}, now=now)
    return None if when is None else max(0.0, (when - now).total_seconds())


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if value >= 0 else None


def _duration(text: str | None) -> float | None:
    """``"1h2m3.5s"``, ``"20ms"`` or a bare number of seconds, in seconds."""
    if not text:
        return None
    text = text.strip()
    bare = _number(text)
    if bare is not None:
        return bare
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
