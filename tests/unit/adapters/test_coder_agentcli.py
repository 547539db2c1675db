"""The pieces the CLI coder adapters share: reading a fault and its reset time from an error
message (message texts as the tools print them; sources in each adapter's docstring)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.adapters.coders.agentcli import classify_fault, parse_reset_at

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Claude AI usage limit reached|1755615600", "usage_limit"),
        ("You've hit your usage limit. Try again at 3:28 PM.", "usage_limit"),
        ("You exceeded your current quota ... 'code': 'insufficient_quota'", "usage_limit"),
        ('API Error: 429 {"type":"error","error":{"type":"rate_limit_error"}}', "rate_limit"),
        ("exceeded retry limit, last status: 429 Too Many Requests", "rate_limit"),
        ("Prompt is too long", "context"),
        ("Codex ran out of room in the model's context window.", "context"),
        ("Model gpt-4o has hit a token limit!", "context"),
        ('API Error: 529 {"type":"error","error":{"type":"overloaded_error"}}', "server"),
        ("exceeded retry limit, last status: 500 Internal Server Error", "server"),
        ("Invalid API key · Please run /login", "auth"),
        ("unexpected status 401 Unauthorized", "auth"),
        ('File "app.py", line 512, in main\nValueError: bad', None),
        ("error on line 429", None),
    ],
)
def test_classify_fault(text: str, kind: str | None) -> None:
    assert classify_fault(text) == kind


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Claude AI usage limit reached|1755615600", datetime.fromtimestamp(1755615600, UTC)),
        (
            "You will regain access on 2026-04-01 at 00:00 UTC.",
            datetime(2026, 4, 1, tzinfo=UTC),
        ),
        ("resets at 2026-03-02T08:30:00+02:00", datetime(2026, 3, 2, 6, 30, tzinfo=UTC)),
        (
            "You've hit your limit · resets 5pm (Europe/Warsaw)",
            datetime(2026, 3, 1, 16, tzinfo=UTC),
        ),
        ("resets 9am (Asia/Seoul)", datetime(2026, 3, 2, 0, tzinfo=UTC)),
        (
            "You've hit your limit - resets Feb 7, 11am (Asia/Seoul)",
            datetime(2027, 2, 7, 2, tzinfo=UTC),
        ),
        ("Try again in 4 days 20 hours 9 minutes.", NOW + timedelta(days=4, hours=20, minutes=9)),
        ("Please try again in 20s.", NOW + timedelta(seconds=20)),
        ("Please try again in 250ms", NOW + timedelta(milliseconds=250)),
        ("retry-after: 30", NOW + timedelta(seconds=30)),
        ("no time in here", None),
    ],
)
def test_parse_reset_at(text: str, expected: datetime | None) -> None:
    assert parse_reset_at(text, NOW) == expected


def test_codex_local_clock_times() -> None:
    local = (NOW + timedelta(hours=3)).astimezone()
    hour = local.hour % 12 or 12
    same_day = f"Try again at {hour}:{local:%M} {local:%p}."
    expected = NOW + timedelta(hours=3)
    if local.date() == NOW.astimezone().date():
        assert parse_reset_at(same_day, NOW) == expected
    dated = f"try again at {local:%b} {local.day}th, {local.year} {hour}:{local:%M} {local:%p}."
    assert parse_reset_at(dated, NOW) == expected


def test_relative_times_need_a_clock() -> None:
    assert parse_reset_at("Please try again in 20s.", None) is None
    assert parse_reset_at("Claude AI usage limit reached|1755615600", None) is not None


@settings(max_examples=200, deadline=None)
@given(
    st.text(max_size=80)
    | st.sampled_from(
        ["resets ", "try again at ", "try again in ", "limit reached|", "retry-after: ", "2026-"]
    ).flatmap(
        lambda s: st.text("0123456789:-+ ,.apmAPMdhsTZUC()/abcJanFeb", max_size=30).map(
            lambda t: s + t
        )
    )
)
def test_never_raise(text: str) -> None:
    classify_fault(text)
    when = parse_reset_at(text, NOW)
    assert when is None or when.tzinfo is not None
