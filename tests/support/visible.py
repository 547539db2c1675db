"""A folder every sandbox shows, for a host socket a test wants a seat to reach for."""

from __future__ import annotations

from pathlib import Path

import pytest

_PRIVATE = (Path("/tmp"), Path("/var/tmp"))  # private inside a sandbox with its own network


def visible_folder() -> Path:
    """Not under /tmp or /var/tmp: the test user's cache, else the tests' own folder (a clean
    clone may well lie under /tmp)."""
    for candidate in (Path.home() / ".cache", Path(__file__).resolve().parent):
        real = candidate.resolve()
        if not any(real == p or p in real.parents for p in _PRIVATE):
            real.mkdir(parents=True, exist_ok=True)
            return real
    pytest.skip("no folder outside /tmp and /var/tmp to make a visible socket in")
