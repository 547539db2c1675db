"""What a run's seats spent after its host died: read from the files their programs left.

A coder's program outlives the assay that started it (its own process group) until recovery
stops it, and may report more usage meanwhile: its output file holds every report. Recovery
reads each dispatch's files with the reader its dispatch used live and journals what they add
to what was journaled, so the closed run accounts for every report its programs made. A
dispatch with no report anywhere is journaled as unknown, never as zero.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from assay.adapters import seats
from assay.adapters.coders import usage_of_logs
from assay.adapters.store.records import DispatchRecord, RunRecord
from assay.adapters.store.sql import Ledger
from assay.adapters.store.usage_log import spend_of
from assay.core.contract import Contract
from assay.core.usage import BudgetLimits, Spend, UsageFigures, exhaustion
from assay.core.vocab import BudgetAction
from assay.engine.metering import RunMeter, coder_key

__all__ = ["account_left_logs", "budget_spent"]


def account_left_logs(
    ledger: Ledger,
    *,
    home: Path,
    task_id: str,
    run_id: str,
    dispatches: Sequence[DispatchRecord],
    clock: Callable[[], datetime],
) -> None:
    """Journal what each started dispatch's files say it spent beyond its journal (its
    program's processes must have been stopped first: the files are then complete)."""
    meter = RunMeter(ledger, task_id=task_id, run_id=run_id, limits=BudgetLimits(), clock=clock)
    for record in dispatches:
        figures = _left(home, run_id, record)
        key = coder_key(task_id, run_id, record.attempt, record.seat, record.coder)
        total = meter.dispatch(key, continuing=True).finish(figures)
        if total.cost_usd is not None and _asked_unanswered(home, run_id, record):
            # The provider may have spent on the call the host died waiting for: one more
            # call, of unknown cost, so the dispatch's cost is unknown (its known part a floor).
            unanswered = replace(total.unpriced(), calls=total.calls + 1)
            meter.dispatch(key, continuing=True).report(unanswered)


def _left(home: Path, run_id: str, record: DispatchRecord) -> UsageFigures | None:
    log_dir = home / "runs" / run_id / f"attempt-{record.attempt}" / f"seat-{record.seat}"
    place = seats.seat_path(home, run_id, f"seat-{record.seat}")
    outputs = sorted(
        place.with_name(place.name + ".out").glob(f"attempt-{record.attempt}.*"),
        key=_modified,
    )
    seat_home = seats.seat_home(place)
    with contextlib.suppress(OSError, ValueError):  # a file it cannot read tells nothing
        return usage_of_logs(
            record.coder,
            log_dir,
            out_dir=outputs[-1] if outputs else None,
            home=seat_home if seat_home.is_dir() else None,
        )
    return None


def _asked_unanswered(home: Path, run_id: str, record: DispatchRecord) -> bool:
    """An in-process ``llm`` dispatch whose transcript ends with a call never answered."""
    if record.coder != "llm":
        return False
    from assay.adapters.coders.llm import TRANSCRIPT, call_in_flight

    log_dir = home / "runs" / run_id / f"attempt-{record.attempt}" / f"seat-{record.seat}"
    return call_in_flight(log_dir / TRANSCRIPT)


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def budget_spent(ledger: Ledger, contract: Contract, record: RunRecord) -> str | None:
    """The spending budget ``record``'s run had exhausted when its process died (the figures),
    if one was and exhausting it holds the task."""
    limits = contract.budgets.limits
    if not limits.any or limits.action is not BudgetAction.HOLD:
        return None
    journal = ledger.usage(task_id=record.task_id)
    run = Spend.of(d.figures for d in journal if d.key.run_id == record.id)
    found = exhaustion(limits, run, spend_of(journal, exclude_run=record.id))
    return found.evidence if found is not None else None
