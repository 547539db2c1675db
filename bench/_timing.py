"""Timing the real ``assay`` command, shared by the benchmarks that run it repeatedly."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from support.repo import Repo

INSTANT_CONTRACT = """task: an instant task
coder: {kind: replay, steps: [{script: "echo done > src/out.txt"}]}
validators: [{id: ok, kind: command, run: "true"}]
land: none
"""
"""A task that takes no time: the benches of the engine's own cost run it."""


def child_env() -> dict[str, str]:
    """The operator's environment without assay's own variables, and with bytecode writing on:
    a child that recompiled assay's sources on every start would measure the compiler."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ASSAY_") and k != "PYTHONDONTWRITEBYTECODE"
    }


def time_assay(
    repo: Repo, *args: str, runs: int, before: Callable[[], None] | None = None
) -> list[float]:
    """Wall seconds of ``runs`` calls of ``assay ARGS`` in ``repo`` (``before`` runs untimed
    ahead of each); any call that fails ends the benchmark with its stderr."""
    walls = []
    for _ in range(runs):
        if before is not None:
            before()
        start = time.perf_counter()
        done = repo.assay(*args)
        walls.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"assay {args[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return walls
