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
from assay.adapters.forced_call import call_in_flight
from assay.adapters.run_files import seat_log_dir
from assay.adapters.store.records import DispatchRecord, RunRecord
from assay.adapters.store.sql import Ledger
from assay.adapters.store.usage_log import spend_of
from assay.adapters.validators.judge import safe_name
from assay.core.contract import Contract
from assay.core.usage import BudgetLimits, Spend, UsageFigures, exhaustion
from assay.core.vocab import BudgetAction, ValidatorKind
from assay.engine.local.metering import DispatchMeter, RunMeter, coder_key, judge_key, validator_key
from assay.engine.local.panel import judge_name

__all__ = ["account_left_logs", "account_unanswered_judges", "budget_spent"]


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
        if _asked_unanswered(home, run_id, record):
            _unanswered(meter.dispatch(key, continuing=True), total)


def account_unanswered_judges(
    ledger: Ledger,
    *,
    home: Path,
    contract: Contract,
    task_id: str,
    run_id: str,
    clock: Callable[[], datetime],
) -> None:
    """Journal each LLM judge (a blind judge, a ``judge`` validator) that was waiting for its
    model's answer when the host died: the provider may have spent on it, so its cost is
    unknown (and its usage, when it had journaled none)."""
    meter = RunMeter(ledger, task_id=task_id, run_id=run_id, limits=BudgetLimits(), clock=clock)
    journaled = {d.key.dispatch: d.figures for d in ledger.usage(run_id=run_id)}
    run_dir = home / "runs" / run_id
    for path in sorted(run_dir.glob("attempt-*/judges/judge-*/round-*/judge.jsonl")):
        parts = path.parents
        attempt, judge = _number(parts[3].name), _number(parts[1].name)
        round_ = _number(parts[0].name)
        if attempt is None or judge is None or round_ is None or not call_in_flight(path):
            continue
        name = judge_name(contract.judge_for(judge - 1))
        key = judge_key(task_id, run_id, attempt, judge, round_, name)
        _unanswered(meter.dispatch(key, continuing=True), journaled.get(key.dispatch))
    judges = [v.id for v in contract.validators if v.kind is ValidatorKind.JUDGE]
    for path in sorted(run_dir.glob("attempt-*/seat-*/validators/judge-*.jsonl")):
        attempt, seat = _number(path.parents[2].name), _number(path.parents[1].name)
        found = [v for v in judges if f"judge-{safe_name(v)}.jsonl" == path.name]
        if attempt is None or seat is None or not found or not call_in_flight(path):
            continue
        key = validator_key(task_id, run_id, attempt, seat, found[0])
        _unanswered(meter.dispatch(key, continuing=True), journaled.get(key.dispatch))


def _unanswered(meter: DispatchMeter, total: UsageFigures | None) -> None:
    """One more call, of unknown cost, on what ``meter``'s dispatch journaled (``total``):
    its cost is unknown (its known part a floor), or, with nothing journaled, its usage."""
    if total is None or not total.reported:
        meter.finish(None)
    elif total.priced:
        meter.report(replace(total, unpriced=True, calls=total.calls + 1))


def _number(name: str) -> int | None:
    """The number a run folder's part ends with (``attempt-2``, ``seat-1``, ``round-0``)."""
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _left(home: Path, run_id: str, record: DispatchRecord) -> UsageFigures | None:
    log_dir = seat_log_dir(home / "runs" / run_id, record.attempt, record.seat)
    outputs = sorted(
        seats.seat_outputs(home, run_id, record.seat).glob(f"attempt-{record.attempt}.*"),
        key=_modified,
    )
    seat_home = seats.seat_home(seats.seat_path(home, run_id, f"seat-{record.seat}"))
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
    from assay.adapters.coders.llm import TRANSCRIPT

    log_dir = seat_log_dir(home / "runs" / run_id, record.attempt, record.seat)
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
