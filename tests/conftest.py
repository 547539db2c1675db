"""Fixtures shared by the whole suite."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Test modules are imported in importlib mode, so the shared `support` package beside this file
# is put on the path explicitly.
sys.path.insert(0, str(Path(__file__).parent))

from support.model_server import ModelServer
from support.postgres import postgres_url  # noqa: F401 (a fixture, shared)
from support.temporal import temporal_server  # noqa: F401 (a fixture, shared)


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    """A scripted OpenAI-compatible server on 127.0.0.1; script it with ``.script(Turn...)``."""
    with ModelServer() as server:
        yield server


# Property tests check logic, not speed: no per-example deadline (CI machines are loaded).
from hypothesis import settings  # noqa: E402

settings.register_profile("assay", deadline=None)
settings.load_profile("assay")
