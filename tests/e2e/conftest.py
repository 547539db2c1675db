"""The end-to-end tier: what only a real process proves (exit codes and signals, crash points,
import weight, ``--json`` against the schema, worker and server kills, the sandbox and the
security attacks, the browser, the real agents). Each test here is marked ``e2e``."""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)
