"""Fixtures for the adapter tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.adapters import llm_client


@pytest.fixture(autouse=True)
def quick_model_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process model clients retry a provider fault as in production (3 calls) but without
    the seconds of backoff; tests of the schedule itself pass their own ``RetryPolicy``."""
    quick = llm_client.RetryPolicy(calls=3, base_seconds=0.001, cap_seconds=0.01)
    monkeypatch.setattr(llm_client, "DEFAULT_RETRY", quick)


@pytest.fixture
def isolated_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The test's git reads no global or system config of the machine's, and no location
    variable points it elsewhere: git's own behaviour, whatever the machine has set."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-global-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.delenv(name, raising=False)
