"""The halt commands' clock: the state file's timestamp form, read without importing datetime."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

import pytest

from assay.adapters.store.halt_ops import utc_now

STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")


def parsed(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def test_utc_now_has_the_state_files_form_and_is_now() -> None:
    before = datetime.now(UTC)
    stamp = utc_now()
    after = datetime.now(UTC)
    assert STAMP.fullmatch(stamp), stamp
    # datetime.now() may be a microsecond behind time.time_ns(): allow the rounding.
    assert before.timestamp() - 1e-6 <= parsed(stamp).timestamp() <= after.timestamp() + 1e-6


def test_utc_now_is_utc_whatever_the_local_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")  # UTC+14
    time.tzset()
    try:
        assert abs(parsed(utc_now()).timestamp() - time.time()) < 5
    finally:
        monkeypatch.undo()
        time.tzset()
