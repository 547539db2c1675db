"""What the tests of a stopped run share, in both tiers: the hold reason a Ctrl-C leaves and
the one task of a fresh repository (the fixture that clears a stop left over is the CLI
tests' own, in :mod:`support.cli_fixtures`)."""

from __future__ import annotations

from pathlib import Path

from assay.core.tasks import Task
from support.in_process import ledger_of

CTRL_C = "stopped by the user (Ctrl-C)"


def only_task(repo: Path) -> Task:
    with ledger_of(repo) as ledger:
        (task,) = ledger.list_tasks()
    return task
