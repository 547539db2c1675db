"""A run's spending, journaled as its programs report it and held to the contract's budgets.

One :class:`RunMeter` per run on the worker that holds its seats; each dispatch (a seat's
coder, a judge) reports to a :class:`DispatchMeter` of it. Every increase goes to the ledger
the moment it is reported (so a killed run still accounts for it), then the run's and the
task's spending is checked against the budgets: once one is spent, every dispatch of the run
is told to stop (``hold``), or the exhaustion is kept for a warning (``warn``).

The meter starts from the ledger: what earlier runs of the task spent (refunded ones too:
money spent is spent) and what this run's dispatches journaled before (a resumed run).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from pydantic import JsonValue

from assay.adapters.coders.base import DispatchResult
from assay.adapters.store.sql import Ledger
from assay.adapters.store.usage_log import DispatchKey, spend_of
from assay.core.usage import BudgetLimits, Exhaustion, Spend, UsageFigures, exhaustion
from assay.core.vocab import BudgetAction, EventKind, UsageRole
from assay.engine.values import RunEvent

__all__ = [
    "DispatchMeter",
    "RunMeter",
    "coder_key",
    "judge_key",
    "metered",
    "validator_key",
]

EventSink = Callable[[RunEvent], None]
NOTHING = UsageFigures(reported=False)


def judge_key(
    task_id: str, run_id: str, attempt: int, judge: int, round_: int, name: str
) -> DispatchKey:
    """A blind judge's ask (``round_`` 0) or deliberation."""
    return DispatchKey(
        task_id=task_id,
        run_id=run_id,
        dispatch=f"a{attempt}.j{judge}.r{round_}",
        role=UsageRole.JUDGE,
        source=name,
        attempt=attempt,
    )


def validator_key(
    task_id: str, run_id: str, attempt: int, seat: int, validator: str
) -> DispatchKey:
    """A judge validator's check of a seat's candidate."""
    return DispatchKey(
        task_id=task_id,
        run_id=run_id,
        dispatch=f"a{attempt}.s{seat}.{validator}",
        role=UsageRole.VALIDATOR,
        source=validator,
        attempt=attempt,
        seat=seat,
    )


def coder_key(task_id: str, run_id: str, attempt: int, seat: int, kind: str) -> DispatchKey:
    return DispatchKey(
        task_id=task_id,
        run_id=run_id,
        dispatch=f"a{attempt}.s{seat}",
        role=UsageRole.CODER,
        source=kind,
        attempt=attempt,
        seat=seat,
    )


class RunMeter:
    """One run's spending and its budgets (thread-safe: seats report from their threads)."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        task_id: str,
        run_id: str,
        limits: BudgetLimits,
        clock: Callable[[], datetime],
        display: EventSink | None = None,
        warn: Callable[[str], None] | None = None,
        fire: Callable[[str], None] | None = None,
    ) -> None:
        self.ledger = ledger
        self.task_id = task_id
        self.run_id = run_id
        self.limits = limits
        self.clock = clock
        self.display = display
        self.warn = warn
        self.fire = fire  # halt-budget-exhausted, with the figures, the moment it is spent
        self._lock = threading.Lock()
        journal = ledger.usage(task_id=task_id)
        self.before = spend_of(journal, exclude_run=run_id)
        self._totals: dict[str, UsageFigures] = {
            d.key.dispatch: d.figures for d in journal if d.key.run_id == run_id
        }
        self._issued: set[str] = set()
        self.exhausted: Exhaustion | None = None
        self._check()

    def dispatch(self, key: DispatchKey, *, continuing: bool = False) -> DispatchMeter:
        """The meter a dispatch reports to. A new dispatch under a key already used (a seat
        dispatched again by a retried activity, a validator run again on a new tip) gets a
        key of its own (``a1.s2~2``): what it spends is new. ``continuing``: the same dispatch
        (a recovery reading what its program printed after its host died)."""
        if continuing:
            return DispatchMeter(self, key)
        with self._lock:
            taken = set(self._totals) | self._issued
            name, number = key.dispatch, 1
            while name in taken:
                number += 1
                name = f"{key.dispatch}~{number}"
            self._issued.add(name)
        return DispatchMeter(self, replace(key, dispatch=name))

    @property
    def spent(self) -> Spend:
        """What this run's dispatches spent so far."""
        with self._lock:
            return Spend.of(self._totals.values())

    def stop_reason(self) -> str | None:
        evidence = self.held_by()
        return f"halt-budget-exhausted: {evidence}" if evidence else None

    def held_by(self) -> str | None:
        """The spent budget's figures when it stops the run (``on_exhausted: hold``)."""
        if self.limits.action is not BudgetAction.HOLD or self.exhausted is None:
            return None
        return self.exhausted.evidence

    def remaining_cost_usd(self) -> float | None:
        return self.limits.remaining_cost_usd(self.spent, self.before)

    def remaining_tokens(self) -> int | None:
        return self.limits.remaining_tokens(self.spent, self.before)

    def journal(self, key: DispatchKey, figures: UsageFigures) -> UsageFigures:
        """Journal what ``figures`` (the dispatch's running total) adds; returns the total."""
        figures = figures.bounded()
        with self._lock:
            before = self._totals.get(key.dispatch)
            if before is not None:
                figures = figures.at_least(before) if figures.reported else before
            if figures.reported:
                increase = figures.increase(before or NOTHING)
                grew = increase.tokens > 0 or bool(increase.cost_usd)
                if before is not None and not grew and figures.priced == before.priced:
                    return before
            elif before is not None:
                return before  # nothing new, and something was journaled before
            else:
                increase = NOTHING
            self.ledger.record_usage(key, increase, priced=figures.priced, at=self.clock())
            self._totals[key.dispatch] = figures
            newly = self._check()
        self._show(key, increase, figures)
        if newly is not None:
            self._show_exhaustion(newly)
        return figures

    def _check(self) -> Exhaustion | None:
        """Check the budgets (under the lock); the exhaustion if it is new."""
        if self.exhausted is not None or not self.limits.any:
            return None
        self.exhausted = exhaustion(self.limits, Spend.of(self._totals.values()), self.before)
        return self.exhausted

    def _show(self, key: DispatchKey, increase: UsageFigures, total: UsageFigures) -> None:
        if self.display is None:
            return
        data: dict[str, JsonValue] = {
            "dispatch": key.dispatch,
            "attempt": key.attempt,
            "seat": key.seat,
            "role": key.role.value,
            "source": key.source,
            "model": total.model,
            "tokens_in": increase.tokens_in,
            "tokens_out": increase.tokens_out,
            "cost_usd": increase.cost_usd,
            "tokens": total.tokens,
            "total_cost_usd": total.cost_usd if total.priced else None,
            "reported": total.reported,
        }
        self.display(RunEvent(EventKind.USAGE_REPORTED, data))

    def _show_exhaustion(self, found: Exhaustion) -> None:
        if self.fire is not None:
            self.fire(found.evidence)
        if self.warn is None:
            return
        if self.limits.action is BudgetAction.HOLD:
            self.warn(f"{found.evidence}: its coders are stopped and no new one starts")
        else:
            self.warn(f"{found.evidence}: it goes on (budgets.on_exhausted: warn)")


class DispatchMeter:
    """One dispatch's view of its run's meter: what a coder adapter reports to."""

    def __init__(self, run: RunMeter, key: DispatchKey) -> None:
        self.run = run
        self.key = key
        self.figures: UsageFigures | None = None
        self._warned = False

    def report(self, figures: UsageFigures) -> None:
        self.figures = self.run.journal(self.key, figures)
        if figures.unpriced or not figures.reported:  # a budget cannot count all of it
            self._uncounted()

    def finish(self, final: UsageFigures | None) -> UsageFigures:
        """The dispatch ended: journal what its final figures add (or, when its program
        reported nothing at all, that its usage is unknown); returns its journaled total."""
        self.figures = self.run.journal(self.key, final or NOTHING)
        if not self.figures.priced:
            self._uncounted()
        return self.figures

    def _uncounted(self) -> None:
        """Say once that a budget cannot count (all of) what this dispatch spent."""
        limits, figures = self.run.limits, self.figures
        if self._warned or self.run.warn is None or figures is None:
            return
        costs = limits.run_cost_usd is not None or limits.task_cost_usd is not None
        tokens = limits.run_tokens is not None or limits.task_tokens is not None
        if not figures.reported and (costs or tokens):
            said = "no usage: no budget can count it"
        elif costs:
            said = "usage without a cost: a cost budget cannot count it (cap its tokens)"
        else:
            return
        self._warned = True
        self.run.warn(f"{self.key.dispatch} ({self.key.source}) reported {said}")

    def stop_reason(self) -> str | None:
        return self.run.stop_reason()

    def remaining_cost_usd(self) -> float | None:
        return self.run.remaining_cost_usd()

    def remaining_tokens(self) -> int | None:
        return self.run.remaining_tokens()


def metered(meter: DispatchMeter, result: DispatchResult) -> DispatchResult:
    """The dispatch ended: its final figures journaled (or its usage journaled as unknown),
    and the result's tokens and cost made the journal's, which saw every report."""
    final = result.usage
    if final is None and (result.tokens_used is not None or result.cost_usd is not None):
        final = UsageFigures(tokens_in=result.tokens_used or 0, cost_usd=result.cost_usd)
    total = meter.finish(final)
    result.usage = total if total.reported else None
    result.tokens_used = total.tokens if total.reported else None
    result.cost_usd = total.cost_usd if total.priced else None  # a known part is no total
    return result
