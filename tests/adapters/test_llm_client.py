"""How provider answers map onto assay's failure kinds and reset times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from assay.adapters.llm_client import (
    FailureKind,
    LlmError,
    classify_status,
    reset_time,
    resolve_endpoint,
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
