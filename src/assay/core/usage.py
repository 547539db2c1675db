"""What model calls spent, and the budgets that cap it (pure).

A program reports its usage as it goes (a claude or codex JSON event, an aider cost line, the
``llm`` coder's every answer); the host journals each increase. :class:`UsageFigures` is one
dispatch's running total as its program reported it; :class:`Spend` sums dispatches. A cost
nobody reported is unknown (``None``), never zero: a sum says how many dispatches it could not
price, and how many reported nothing at all.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

from assay.core.vocab import BudgetAction

__all__ = [
    "FIRST_CALL",
    "MAX_COUNT",
    "BudgetLimits",
    "Exhaustion",
    "Spend",
    "UsageFigures",
    "exhaustion",
    "money",
    "with_call",
]


MAX_COUNT = 2**62 - 1
"""The most tokens in (or out) one dispatch is counted at: a report is not trusted to be sane
(a model can make aider print any ``Tokens:`` line), and in and out together must still fit the
ledger's 64-bit columns. No real dispatch comes near it, and it spends any budget."""


@dataclass(frozen=True)
class UsageFigures:
    """One dispatch's (or one judge call's) usage so far, as its program reported it.

    ``cost_usd``: the cost it reported (None: none yet). ``unpriced``: some of its usage came
    without a cost, so ``cost_usd`` is only the known part. ``reported`` False: it gave no
    usage at all (unknown, counted apart). Its cost is known (:attr:`priced`) only when it
    reported one and nothing came without."""

    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None
    model: str | None = None
    calls: int = 0
    reported: bool = True
    unpriced: bool = False

    def __post_init__(self) -> None:
        if self.tokens_in < 0 or self.tokens_out < 0 or self.calls < 0:
            raise ValueError("usage counts are never negative")
        if self.cost_usd is not None and not (math.isfinite(self.cost_usd) and self.cost_usd >= 0):
            raise ValueError(f"a cost is a finite amount of at least 0, not {self.cost_usd!r}")

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    @property
    def priced(self) -> bool:
        """The whole cost is known."""
        return self.reported and self.cost_usd is not None and not self.unpriced

    @property
    def known_cost(self) -> float:
        """The part of the cost that was reported (a lower bound when not :attr:`priced`)."""
        return self.cost_usd or 0.0

    def bounded(self) -> UsageFigures:
        """These figures with each count at most :data:`MAX_COUNT`."""
        if max(self.tokens_in, self.tokens_out, self.calls) <= MAX_COUNT:
            return self
        return replace(
            self,
            tokens_in=min(self.tokens_in, MAX_COUNT),
            tokens_out=min(self.tokens_out, MAX_COUNT),
            calls=min(self.calls, MAX_COUNT),
        )

    def increase(self, before: UsageFigures) -> UsageFigures:
        """What these figures add to ``before`` (same dispatch): never negative, so a program
        that restarts its counts (or reports a smaller total at its end) takes nothing back.
        Its ``cost_usd`` is the known cost added (None: none known yet)."""
        cost: float | None
        if self.cost_usd is None:
            cost = None
        else:
            cost = max(0.0, round(self.cost_usd - before.known_cost, 9))
        return UsageFigures(
            tokens_in=max(0, self.tokens_in - before.tokens_in),
            tokens_out=max(0, self.tokens_out - before.tokens_out),
            cost_usd=cost,
            model=self.model or before.model,
            calls=max(0, self.calls - before.calls),
            reported=self.reported,
            unpriced=self.unpriced,
        )

    def at_least(self, other: UsageFigures) -> UsageFigures:
        """The larger of two running totals of one dispatch, field by field (a final report
        and what was streamed before it); usage that came without a cost stays so."""
        if other.cost_usd is None:
            cost = self.cost_usd
        elif self.cost_usd is None:
            cost = other.cost_usd
        else:
            cost = max(self.cost_usd, other.cost_usd)
        return UsageFigures(
            tokens_in=max(self.tokens_in, other.tokens_in),
            tokens_out=max(self.tokens_out, other.tokens_out),
            cost_usd=cost,
            model=self.model or other.model,
            calls=max(self.calls, other.calls),
            reported=self.reported or other.reported,
            unpriced=self.unpriced or other.unpriced,
        )


FIRST_CALL = UsageFigures(reported=False)
"""A model loop's figures before its first answer: nothing spent, nothing reported yet."""


def with_call(
    figures: UsageFigures,
    *,
    tokens_in: int,
    tokens_out: int,
    cost_usd: float | None,
    model: str | None,
    counted: bool = True,
) -> UsageFigures:
    """``figures`` plus one model answer. An answer without a cost leaves the cost known only
    in part (``unpriced``); the costs that did come still count (toward a budget too). An
    answer without token counts (``counted`` False) is spending nobody reported: a loop whose
    answers never had any reported no usage at all (unknown, never zero)."""
    cost = figures.cost_usd
    if cost_usd is not None:
        summed = round(figures.known_cost + cost_usd, 9)
        if math.isfinite(summed):
            cost = summed
        else:  # past any float: an amount no sum holds, so this answer's cost is not known
            cost_usd = None
    return UsageFigures(
        tokens_in=figures.tokens_in + max(0, tokens_in),
        tokens_out=figures.tokens_out + max(0, tokens_out),
        cost_usd=cost,
        model=model or figures.model,
        calls=figures.calls + 1,
        reported=figures.reported or counted,
        unpriced=figures.unpriced or cost_usd is None or not counted,
    )


@dataclass(frozen=True)
class Spend:
    """A sum of dispatches' usage. ``cost_usd`` is the total, or None when any dispatch is
    unpriced (``priced_cost_usd`` is then a lower bound)."""

    tokens_in: int = 0
    tokens_out: int = 0
    priced_cost_usd: float = 0.0
    dispatches: int = 0
    unpriced: int = 0  # dispatches that reported tokens but no cost
    unreported: int = 0  # dispatches that reported no usage at all

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    @property
    def cost_usd(self) -> float | None:
        return None if self.unpriced or self.unreported else round(self.priced_cost_usd, 6)

    def plus(self, other: Spend) -> Spend:
        return Spend(
            tokens_in=self.tokens_in + other.tokens_in,
            tokens_out=self.tokens_out + other.tokens_out,
            priced_cost_usd=round(self.priced_cost_usd + other.priced_cost_usd, 9),
            dispatches=self.dispatches + other.dispatches,
            unpriced=self.unpriced + other.unpriced,
            unreported=self.unreported + other.unreported,
        )

    @classmethod
    def of(cls, dispatches: Iterable[UsageFigures]) -> Spend:
        """The sum of dispatches' running totals (one entry per dispatch)."""
        total = cls()
        for figures in dispatches:
            total = total.plus(
                cls(
                    tokens_in=figures.tokens_in,
                    tokens_out=figures.tokens_out,
                    priced_cost_usd=figures.known_cost,
                    dispatches=1,
                    unpriced=int(figures.reported and not figures.priced),
                    unreported=int(not figures.reported),
                )
            )
        return total


@dataclass(frozen=True)
class BudgetLimits:
    """A run's and a task's caps on spending (None: no cap), and what exhausting one does."""

    run_tokens: int | None = None
    run_cost_usd: float | None = None
    task_tokens: int | None = None
    task_cost_usd: float | None = None
    action: BudgetAction = BudgetAction.HOLD

    @property
    def any(self) -> bool:
        caps = (self.run_tokens, self.run_cost_usd, self.task_tokens, self.task_cost_usd)
        return any(cap is not None for cap in caps)

    def remaining_cost_usd(self, run: Spend, task_before: Spend) -> float | None:
        """What may still be spent in money (None: no money cap), never below 0."""
        left = [
            cap - spent.priced_cost_usd
            for cap, spent in (
                (self.run_cost_usd, run),
                (self.task_cost_usd, task_before.plus(run)),
            )
            if cap is not None
        ]
        return max(0.0, round(min(left), 6)) if left else None

    def remaining_tokens(self, run: Spend, task_before: Spend) -> int | None:
        left = [
            cap - spent.tokens
            for cap, spent in (
                (self.run_tokens, run),
                (self.task_tokens, task_before.plus(run)),
            )
            if cap is not None
        ]
        return max(0, min(left)) if left else None


@dataclass(frozen=True)
class Exhaustion:
    """A budget that is spent: which, and the figures, in words for the halt's evidence."""

    budget: str  # "budgets.max_tokens" | "budgets.max_cost_usd" | "budgets.task_max_..."
    evidence: str


def money(amount: float) -> str:
    return f"${amount:,.4f}".rstrip("0").rstrip(".") if amount else "$0"


def exhaustion(limits: BudgetLimits, run: Spend, task_before: Spend) -> Exhaustion | None:
    """The first budget ``run`` (with what the task spent in earlier runs) has reached, or
    None. A budget is spent once the spending reaches it: the next model call would pass it."""
    task = task_before.plus(run)
    checks: list[tuple[str, str, int | float | None, int | float]] = [
        ("budgets.max_tokens", "the run", limits.run_tokens, run.tokens),
        ("budgets.max_cost_usd", "the run", limits.run_cost_usd, run.priced_cost_usd),
        ("budgets.task_max_tokens", "the task", limits.task_tokens, task.tokens),
        ("budgets.task_max_cost_usd", "the task", limits.task_cost_usd, task.priced_cost_usd),
    ]
    for name, who, cap, spent in checks:
        if cap is None or spent < cap:
            continue
        if name.endswith("tokens"):
            figures = f"{int(spent):,} tokens of its {int(cap):,}-token budget"
        else:
            figures = f"{money(float(spent))} of its {money(float(cap))} budget"
        across = " (across its runs)" if who == "the task" else ""
        return Exhaustion(name, f"{who} spent {figures}{across} ({name}: {cap})")
    return None
