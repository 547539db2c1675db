"""A dispatch of the ``llm`` coder against the scripted model server, for its tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from assay.adapters.coders.base import DispatchRequest
from support.model_server import ModelServer


def make_request(
    server: ModelServer, worktree: Path, *, max_turns: int | None = 10, **settings: Any
) -> DispatchRequest:
    base = worktree.parent
    return DispatchRequest(
        worktree=worktree,
        prompt="Create hello.txt saying hello.",
        dispatch_id="d-1",
        attempt=1,
        seat=1,
        halt_state_dir=base / "halts",
        report_path=base / "report.json",
        log_dir=base / "logs",
        env={"PATH": os.environ["PATH"], "LOCAL_KEY": "anything"},
        settings={
            "kind": "llm",
            "model": "scripted-model",
            "base_url": server.base_url,
            "api_key_env": "LOCAL_KEY",
            **settings,
        },
        timeout_seconds=30,
        max_turns=max_turns,
        validator_commands={"check": "test -f hello.txt && cat hello.txt"},
    )
