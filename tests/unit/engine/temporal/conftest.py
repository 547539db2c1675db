"""One Temporal server for the session, in-process tests drive through Temporal's own test
environment: the dev server binary this project installs (no download, no network)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from support.scripted_effects import TemporalEnv
from support.temporal import require_binary
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment


@pytest.fixture(scope="session")
def temporal_env() -> Iterator[TemporalEnv]:
    binary = require_binary()
    loop = asyncio.new_event_loop()
    env = loop.run_until_complete(
        WorkflowEnvironment.start_local(
            dev_server_existing_path=str(binary),
            data_converter=pydantic_data_converter,
            ui=False,
            dev_server_log_level="error",
        )
    )
    try:
        yield TemporalEnv(env, loop)
    finally:
        loop.run_until_complete(env.shutdown())
        loop.close()
