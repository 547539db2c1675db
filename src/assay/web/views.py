"""What the dashboard's pages show, read from the ledger: pure data for templates.

Each function reads in one read transaction and returns a frozen value of
:mod:`assay.web.view_models` (re-exported here). A run's page is built from its event log while
it is open, so it works the same for local and Temporal runs; a closed run adds its attempt and
dispatch rows and the documents its close kept (``run_documents``), falling back to its payload
file for a run closed before the ledger kept them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assay.adapters.store.sql import Ledger
from assay.web.view_models import (
    UNREADABLE_STATUS,
    ActionView,
    AttemptState,
    AttemptView,
    FiredHaltRow,
    HaltsPage,
    HaltView,
    QueuePage,
    QueueRow,
    ReportFile,
    ReportMark,
    ReportView,
    RunBrief,
    RunView,
    SeatState,
    SeatView,
    TallyView,
    TaskView,
    Totals,
    ValidatorView,
)

__all__ = [
    "UNREADABLE_STATUS",
    "ActionView",
    "AttemptState",
    "AttemptView",
    "FiredHaltRow",
    "HaltView",
    "HaltsPage",
    "QueuePage",
    "QueueRow",
    "ReportFile",
    "ReportMark",
    "ReportView",
    "RunBrief",
    "RunView",
    "SeatState",
    "SeatView",
    "TallyView",
    "TaskView",
    "Totals",
    "ValidatorView",
    "halts_page",
    "payload_document",
    "queue_page",
    "run_view",
    "task_view",
]


def queue_page(
    ledger: Ledger, *, status: str | None = None, page: int = 1, per_page: int = 50
) -> QueuePage:
    raise NotImplementedError


def task_view(ledger: Ledger, task_id: str) -> TaskView | None:
    raise NotImplementedError


def run_view(ledger: Ledger, run_id: str, *, state_dir: Path | None) -> RunView | None:
    raise NotImplementedError


def halts_page(
    ledger: Ledger, *, state_dir: Path | None, page: int = 1, per_page: int = 50
) -> HaltsPage:
    raise NotImplementedError


def payload_document(ledger: Ledger, run_id: str) -> dict[str, Any] | None:
    raise NotImplementedError
