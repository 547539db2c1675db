"""Fixtures for the adapter tests."""

from __future__ import annotations

import pytest

from assay.adapters import llm_client


@pytest.fixture(autouse=True)
def quick_model_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process model clients retry a provider fault as in production (3 calls) but without
    the seconds of backoff; tests of the schedule itself pass their own ``RetryPolicy``."""
    quick = llm_client.RetryPolicy(calls=3, base_seconds=0.001, cap_seconds=0.01)
    monkeypatch.setattr(llm_client, "DEFAULT_RETRY", quick)
