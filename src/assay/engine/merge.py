"""The ``merge`` land mode of the local executor: one squashed commit on the base branch.

The git side (squash, compare-and-swap, idempotence by trailer) is
:func:`assay.adapters.landing.land_squash`; this module gives it the commit's message and the
revalidation it needs when the base branch moved during the run: the combined tree is checked
out in the seat's worktree and the same validators and policy the graph used decide on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from assay.adapters import git, landing
from assay.adapters.store import halt_files
from assay.core.attempts import AttemptRecord
from assay.core.policy import decide
from assay.core.results import ValidatorResult
from assay.core.vocab import AttemptOutcome, PolicyAction, RunStatus
from assay.engine.accounting import failure_detail
from assay.engine.effects import LandOutcome, RunPlan, SeatOutcome

if TYPE_CHECKING:
    from assay.engine.local import LocalEffects


def merge_squashed(
    fx: LocalEffects,
    plan: RunPlan,
    seat: SeatOutcome,
    branch: str,
    into: str,
    attempts: Sequence[AttemptRecord],
) -> LandOutcome:
    """Land ``branch`` on ``into`` as one commit: merged, ready (refused; the branch is left)
    or blocked (the base moved and the change does not hold on its new tip)."""
    message = landing.SquashMessage(
        task=plan.contract.task,
        task_id=plan.task_id,
        run_id=plan.run_id,
        attempts=max(len(attempts), seat.attempt),
        blocked=sum(1 for a in attempts if a.outcome is AttemptOutcome.BLOCKED),
        coder=seat.coder,
        seat=seat.seat,
        validators=validator_verdicts(plan, fx.results.get((seat.attempt, seat.seat), [])),
    )
    revalidations: list[str] = []

    def revalidate(combined: str, tip: str) -> str | None:
        revalidations.append(combined)
        return _revalidate(fx, plan, seat, branch, combined, tip)

    try:
        with land_lock(fx.home):
            commit = landing.land_squash(
                plan.repo_root,
                branch=branch,
                into_branch=into,
                base_commit=plan.base_commit,
                message=message,
                revalidate=revalidate,
            )
    except landing.LandBlocked as moved:
        return LandOutcome(RunStatus.BLOCKED, str(moved), branch, validations=len(revalidations))
    except landing.LandRefused as refused:
        fx.warn(f"merge refused, branch {branch} left instead: {refused}")
        return LandOutcome(
            RunStatus.READY,
            f"branch {branch} ready ({refused})",
            branch,
            validations=len(revalidations),
        )
    return LandOutcome(
        RunStatus.MERGED,
        f"merged into {into} as one commit, {commit[:12]}",
        branch,
        validations=len(revalidations),
    )


def validator_verdicts(plan: RunPlan, results: Sequence[ValidatorResult]) -> list[str]:
    """Each contract validator with the severity it actually gave ("lint: warn"), so a commit
    never says a check passed that only warned or failed advisorily."""
    given = {r.validator_id: r for r in results}
    verdicts = []
    for spec in plan.contract.validators:
        result = given.get(spec.id)
        if result is None:
            verdicts.append(f"{spec.id}: not run")
        else:
            verdicts.append(f"{spec.id}: {'error' if result.error else result.severity.value}")
    return verdicts


def _revalidate(
    fx: LocalEffects, plan: RunPlan, seat: SeatOutcome, branch: str, combined: str, tip: str
) -> str | None:
    """Run the validators on ``combined`` (the change applied to the moved base's ``tip``) in
    the seat's worktree, then put the worktree back on its branch. None: they pass."""
    landing.check_out(seat.worktree, combined)
    try:
        change = git.read_changes(seat.worktree, tip)
        # Called from the landing thread, which runs no event loop of its own.
        outcomes = asyncio.run(fx.validate(plan, dataclasses.replace(seat, change=change)))
    finally:
        landing.check_out(seat.worktree, branch)
    results = [o.result for o in outcomes]
    decision = decide(results, plan.contract.policy, plan.contract.threshold)
    if decision.action is PolicyAction.PROCEED and all(o.fire is None for o in outcomes):
        return None
    failed = [r for r in results if r.error or r.blocks] or results
    return "the validators block: " + "; ".join(
        f"{r.validator_id}: {failure_detail(r)}"[:300] for r in failed
    )


@contextlib.contextmanager
def land_lock(home: Path) -> Iterator[None]:
    """Landings of one repository's runs happen one at a time, across threads and processes
    (the compare-and-swap still guards against anyone else moving the branch)."""
    with halt_files.locked(home / "land", create_dir=True):
        yield
