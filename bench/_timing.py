"""Timing the real ``assay`` command, shared by the benchmarks that run it repeatedly."""

from __future__ import annotations

import time
from collections.abc import Callable

from support.repo import Repo


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
