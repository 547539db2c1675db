"""The unit tier runs in-process: no ``assay`` process and no server process is started here.

A test that needs one belongs in ``tests/e2e``. Like pip's refusal of its ``script`` fixture in
unit tests, the fixtures that start processes are refused at setup, and so is any direct start
of the ``assay`` program (``Repo.main`` runs the CLI in-process instead of ``Repo.assay``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

# Fixtures that start a process of assay's or a server's (a dev server, a worker, a browser).
PROCESS_FIXTURES = frozenset({"temporal_server", "assay", "workers", "page", "browser"})


def _starts_assay(args: Any) -> bool:
    argv = [args] if isinstance(args, (str, bytes, Path)) else list(args or [])
    if not argv:
        return False
    first = Path(str(argv[0])).name
    if first == "assay":
        return True
    if not first.startswith("python") or "-m" not in argv[:-1]:
        return False
    module = str(argv[argv.index("-m") + 1])  # python -m assay, python -m assay.cli.main
    return module == "assay" or module.startswith("assay.")


@contextmanager
def _assay_refused() -> Iterator[None]:
    """Any start of the ``assay`` program in the block raises instead."""
    real_init = subprocess.Popen.__init__

    def guarded(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        if _starts_assay(args):
            raise RuntimeError(
                f"a unit test started the assay program ({args!r}): "
                "drive the CLI in-process (Repo.main, support.in_process) or move it to tests/e2e"
            )
        real_init(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = guarded  # type: ignore[method-assign]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = real_init  # type: ignore[method-assign]


# The guard wraps each phase of every unit item, fixtures included: a session-scoped fixture is
# set up inside the setup of the first item that needs it (and torn down in the last one's
# teardown), so a function-scoped autouse fixture would come too late to refuse it.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    used = PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ()))
    if used:
        raise RuntimeError(
            f"{item.nodeid} uses {sorted(used)}, which start processes: "
            "a unit test runs in-process (move it to tests/e2e)"
        )
    with _assay_refused():
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _assay_refused():
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    with _assay_refused():
        yield
