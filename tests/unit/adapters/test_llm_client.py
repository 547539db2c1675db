"""How provider answers map onto assay's failure kinds and reset times."""

from __future__ import annotations

import signal
import threading
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from support.model_server import HttpError, ModelServer, Turn

from assay.adapters import process
from assay.adapters.llm_client import (
    ChatClient,
    Endpoint,
    FailureKind,
    LlmError,
    RetryPolicy,
    classify_status,
    reset_time,
    resolve_endpoint,
    retry_after_seconds,
)

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "7"}, 7),
        ({"Retry-After": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"x-ratelimit-reset-requests": "1m30s"}, 90),
        ({"x-ratelimit-reset-requests": "20ms", "x-ratelimit-reset-tokens": "6m0s"}, 360),
        ({"x-ratelimit-reset-tokens": "1h2m3s"}, 3723),
        ({"retry-after": "2", "x-ratelimit-reset-requests": "1m"}, 2),
    ],
)
def test_reset_time_from_headers(headers: dict[str, str], seconds: float) -> None:
    assert reset_time(headers, now=NOW) == NOW + timedelta(seconds=seconds)


def test_reset_time_from_an_http_date_and_unknown_forms() -> None:
    when = reset_time({"retry-after": "Wed, 01 Jan 2025 12:05:00 GMT"}, now=NOW)
    assert when == NOW + timedelta(minutes=5)
    assert reset_time({}, now=NOW) is None
    assert reset_time({"x-ratelimit-reset-requests": "soon"}, now=NOW) is None


def test_classify_status() -> None:
    limited = classify_status(429, {"retry-after": "3"}, {"code": "rate_limit_exceeded"}, "slow")
    assert limited.kind is FailureKind.QUOTA
    assert limited.quota is not None
    assert limited.quota.kind == "rate_limit"
    usage = classify_status(429, {}, {"code": "insufficient_quota"}, "pay up")
    assert usage.quota is not None
    assert (usage.quota.kind, usage.quota.reset_at) == ("usage_limit", None)
    context = classify_status(400, {}, {"code": "context_length_exceeded"}, "too long")
    assert context.kind is FailureKind.CONTEXT
    assert classify_status(400, {}, None, "maximum context length is 8k").kind is (
        FailureKind.CONTEXT
    )
    assert classify_status(503, {}, None, "down").kind is FailureKind.PROVIDER
    assert classify_status(401, {}, None, "bad key").kind is FailureKind.CONFIG
    assert classify_status(422, {}, None, "bad tools").kind is FailureKind.REQUEST


def test_resolve_endpoint() -> None:
    env = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://env/v1"}
    endpoint = resolve_endpoint({"model": "m"}, env, timeout=5, role="judge")
    assert (endpoint.model, endpoint.base_url, endpoint.api_key) == ("m", "http://env/v1", "k")
    named = resolve_endpoint(
        {"model": "m", "base_url": "http://x/v1", "api_key_env": "MY_KEY", "max_turns": 2},
        {"MY_KEY": "mine"},
        timeout=5,
        role="judge",
    )
    assert (named.base_url, named.api_key) == ("http://x/v1", "mine")
    with pytest.raises(LlmError) as caught:
        resolve_endpoint({"model": "m"}, {}, timeout=5, role="judge")
    assert caught.value.kind is FailureKind.CONFIG
    assert "OPENAI_API_KEY" in caught.value.detail


@pytest.mark.parametrize("url", ["http://localhost:notaport/v1", "http:///v1", " http://h/v1"])
def test_an_endpoint_no_client_can_reach_is_a_setting_to_fix(url: str) -> None:
    """A bad URL (from the environment: the contract's is checked when it is read) is the
    operator's setting, said with where it came from; never an error inside the HTTP client."""
    env = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": url}
    with pytest.raises(LlmError) as caught:
        resolve_endpoint({"model": "m"}, env, timeout=5, role="llm coder")
    assert caught.value.kind is FailureKind.CONFIG
    assert caught.value.detail.startswith("the llm coder's endpoint $OPENAI_BASE_URL ")


# -- provider faults are retried; rate limits are not ---------------------------------------


def _client(
    server: ModelServer, sleeps: list[float], retry: RetryPolicy | None = None
) -> ChatClient:
    endpoint = Endpoint(model="gpt-test", base_url=server.base_url, api_key="k", timeout=60)
    return ChatClient(endpoint, retry=retry, sleep=sleeps.append)


def _fault(status: int, retry_after: float | None = None) -> Turn:
    return Turn(error=HttpError(status, "server", "service unavailable", retry_after))


def test_a_provider_fault_is_retried_then_answers(model_server: ModelServer) -> None:
    model_server.script(_fault(503, retry_after=0), Turn.overloaded(), Turn.reply("hello"))
    sleeps: list[float] = []
    reply = _client(model_server, sleeps, RetryPolicy()).complete(
        [{"role": "user", "content": "hi"}]
    )
    assert reply.text == "hello"
    assert len(model_server.completions) == 3
    # Retry-After: 0 is honoured; the overloaded answer had none, so the backoff's second step.
    assert sleeps == [0.0, 2.0]


def test_a_provider_fault_that_persists_says_how_many_calls(model_server: ModelServer) -> None:
    model_server.when_exhausted = _fault(503, retry_after=0)
    sleeps: list[float] = []
    with pytest.raises(LlmError) as caught:
        _client(model_server, sleeps).complete([{"role": "user", "content": "hi"}])
    assert caught.value.kind is FailureKind.PROVIDER
    assert caught.value.status == 503
    assert caught.value.detail.endswith("3 of 3 calls")
    assert "HTTP 503" in caught.value.detail
    assert len(model_server.completions) == 3
    assert sleeps == [0.0, 0.0]


def test_the_backoff_is_exponential_and_capped(model_server: ModelServer) -> None:
    model_server.when_exhausted = _fault(500)
    sleeps: list[float] = []
    retry = RetryPolicy(calls=5, base_seconds=4, cap_seconds=10)
    with pytest.raises(LlmError) as caught:
        _client(model_server, sleeps, retry).complete([{"role": "user", "content": "hi"}])
    assert sleeps == [4, 8, 10, 10]
    assert caught.value.detail.endswith("5 of 5 calls")
    assert RetryPolicy(cap_seconds=20).delay(1, retry_after=3600) == 20


def test_a_retry_after_date_is_honoured() -> None:
    now = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
    headers = {"Retry-After": "Wed, 01 Jan 2025 12:00:05 GMT"}
    assert retry_after_seconds(headers, now=now) == 5
    assert retry_after_seconds({"retry-after": "2"}, now=now) == 2
    assert retry_after_seconds({"x-ratelimit-reset-requests": "1m"}, now=now) is None
    assert classify_status(503, headers, None, "down", now=now).retry_after == 5


def test_a_rate_limit_is_not_retried(model_server: ModelServer) -> None:
    model_server.script(Turn.rate_limited(retry_after=0), Turn.reply("never asked"))
    sleeps: list[float] = []
    with pytest.raises(LlmError) as caught:
        _client(model_server, sleeps).complete([{"role": "user", "content": "hi"}])
    assert caught.value.kind is FailureKind.QUOTA
    assert len(model_server.completions) == 1
    assert sleeps == []


def test_a_refused_request_is_not_retried(model_server: ModelServer) -> None:
    model_server.script(Turn(error=HttpError(401, "auth", "bad key")), Turn.reply("never"))
    with pytest.raises(LlmError) as caught:
        _client(model_server, []).complete([{"role": "user", "content": "hi"}])
    assert caught.value.kind is FailureKind.CONFIG
    assert len(model_server.completions) == 1


def test_a_connection_refused_is_retried_and_counted() -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    endpoint = Endpoint(model="m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", timeout=5)
    sleeps: list[float] = []
    client = ChatClient(endpoint, retry=RetryPolicy(), sleep=sleeps.append)
    with pytest.raises(LlmError) as caught:
        client.complete([{"role": "user", "content": "hi"}])
    assert caught.value.kind is FailureKind.PROVIDER
    assert caught.value.detail.endswith("3 of 3 calls")
    assert sleeps == [1.0, 2.0]


def test_no_retry_starts_past_the_callers_deadline(model_server: ModelServer) -> None:
    model_server.when_exhausted = _fault(503, retry_after=30)
    sleeps: list[float] = []
    with pytest.raises(LlmError) as caught:
        client = _client(model_server, sleeps, RetryPolicy())
        client.complete([{"role": "user", "content": "hi"}], timeout=5)
    assert sleeps == []
    assert caught.value.detail.endswith("1 of 3 calls")


def _scripted(*answers: httpx.Response | Exception) -> ChatClient:
    """A client whose endpoint gives ``answers`` in order (httpx's own transport): a response,
    or the transport error its request meets."""
    endpoint = Endpoint(model="m", base_url="http://endpoint/v1", api_key="k", timeout=5)
    client = ChatClient(endpoint, retry=RetryPolicy(), sleep=lambda _: None)
    queue = list(answers)

    def answer(request: httpx.Request) -> httpx.Response:
        given = queue.pop(0)
        if isinstance(given, Exception):
            raise given
        return given

    client._http = httpx.Client(
        base_url="http://endpoint/v1/", transport=httpx.MockTransport(answer)
    )
    return client


ANSWER = {
    "choices": [{"message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 100, "completion_tokens": 10, "cost": 0.01},
}
HI = [{"role": "user", "content": "hi"}]


def test_an_answer_whose_message_is_no_object_is_a_provider_fault_not_a_crash() -> None:
    odd = {"choices": [{"message": "hi"}], "usage": {"prompt_tokens": 10}}
    client = _scripted(httpx.Response(200, json=odd), httpx.Response(200, json=ANSWER))
    assert client.complete(HI).text == "done"
    assert client.spent.tokens_in == 110  # the odd answer was billed all the same


@pytest.mark.parametrize(
    "lost",
    [
        httpx.Response(200, content=b'{"choices": [{"message": '),  # cut short
        httpx.ReadTimeout("read timed out"),
        httpx.RemoteProtocolError("peer closed the connection"),
    ],
)
def test_a_request_perhaps_billed_without_an_answer_leaves_the_cost_known_in_part(
    lost: httpx.Response | Exception,
) -> None:
    """An answer cut short, or a request sent whole and then lost: the provider may have
    billed it, so the cost the retry's answer gives is only the known part."""
    client = _scripted(lost, httpx.Response(200, json=ANSWER))
    assert client.complete(HI).text == "done"
    spent = client.spent
    assert (spent.calls, spent.known_cost, spent.priced) == (2, 0.01, False)


def test_a_request_never_sent_or_refused_costs_nothing() -> None:
    refused = httpx.ConnectError("connection refused")
    overloaded = httpx.Response(503, json={"error": {"message": "overloaded"}})
    client = _scripted(refused, overloaded, httpx.Response(200, json=ANSWER))
    assert client.complete(HI).text == "done"
    assert (client.spent.calls, client.spent.priced, client.spent.cost_usd) == (1, True, 0.01)


def test_an_unreachable_endpoint_is_named_without_its_credentials() -> None:
    with ModelServer() as stopped:  # a port that was just served and is closed now
        port = stopped.base_url.split(":")[2].split("/")[0]
    url = f"http://someone:pw-secret@127.0.0.1:{port}/v1?api-key=qs-secret"
    client = ChatClient(Endpoint("m", url, "sk-key", 5), retry=RetryPolicy(calls=1))
    with pytest.raises(LlmError) as info:
        client.complete(HI)
    detail = info.value.detail
    assert info.value.kind is FailureKind.PROVIDER
    assert f"cannot reach the model endpoint http://***@127.0.0.1:{port}/v1: " in detail
    assert "secret" not in detail and "sk-key" not in detail
    default = ChatClient(Endpoint("m", None, "sk-key", 5))
    assert default._http.base_url == httpx.URL("https://api.openai.com/v1/")  # what it names


def test_a_stop_request_ends_a_call_the_model_has_not_answered(
    model_server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT or SIGTERM stops child processes at once; a model call is no process, and a model
    may take minutes to answer: the call gives up as the stop comes, the answer unawaited."""
    monkeypatch.setattr(process, "_stop", [])
    model_server.script(Turn.reply("too late"))
    gate = model_server.hold(1, timeout=30)
    threading.Timer(0.3, process.request_stop, args=(signal.SIGTERM,)).start()
    start = time.monotonic()
    try:
        with pytest.raises(LlmError) as caught:
            _client(model_server, [], RetryPolicy()).complete([{"role": "user", "content": "hi"}])
    finally:
        gate.open()
    assert time.monotonic() - start < 1.5
    assert caught.value.detail == "stopped by assay (SIGTERM) before the model answered"
    assert len(model_server.completions) == 1  # never retried


def test_a_stop_request_ends_the_wait_before_a_retry(
    model_server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait before a retry may be 20 s; a stop does not wait them out."""
    monkeypatch.setattr(process, "_stop", [])
    model_server.script(_fault(503), Turn.reply("too late"))
    endpoint = Endpoint(model="gpt-test", base_url=model_server.base_url, api_key="k", timeout=60)
    threading.Timer(0.3, process.request_stop, args=(signal.SIGTERM,)).start()
    start = time.monotonic()
    with pytest.raises(LlmError) as caught:
        client = ChatClient(endpoint, retry=RetryPolicy(base_seconds=20))
        client.complete([{"role": "user", "content": "hi"}])
    assert time.monotonic() - start < 1.5
    assert caught.value.detail == "stopped by assay (SIGTERM) before the model answered"
    assert len(model_server.completions) == 1  # never retried
