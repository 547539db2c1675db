"""The land modes of the local executor; ``merge``: one squashed commit on the base branch.

The git side (squash, compare-and-swap, idempotence by trailer) is
:func:`assay.adapters.landing.land_squash`; this module gives it the commit's message, the
trees the checks ran on (it lands no other), and the revalidation it needs when the base
branch moved during the run: the same validators and policy the graph used decide on the
combined tree, each command validator in a fresh checkout of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from assay.adapters import landing, origin
from assay.adapters.store import halt_files
from assay.core.attempts import AttemptRecord
from assay.core.policy import decide
from assay.core.results import ValidatorResult
from assay.core.vocab import AttemptOutcome, CrashPoint, LandMode, PolicyAction, RunStatus
from assay.engine.crashpoints import crash_point
from assay.engine.graph.records import failure_detail
from assay.engine.local.site import RunSite
from assay.engine.values import Candidate, LandOutcome, RunPlan


def land_candidate(
    fx: RunSite,
    plan: RunPlan,
    seat: Candidate,
    blocked: bool = False,
    failures: Sequence[str] = (),
    attempts: Sequence[AttemptRecord] = (),
) -> LandOutcome:
    """Land the chosen candidate as the contract's ``land`` mode says (``pr`` also leaves a
    blocked run's candidate for review)."""
    mode = plan.contract.land
    if mode is LandMode.NONE and not blocked:
        return LandOutcome(RunStatus.READY, "validators passed; nothing landed (land: none)")
    # Only now, and only a candidate that passed the scope and secret checks, enters the
    # user's repository: fetched from the seat as its branch.
    branch = fx.seating.publish(plan, seat.attempt, seat.seat)
    if branch is None:
        return LandOutcome(
            RunStatus.BLOCKED,
            "the candidate was not brought into the repository: "
            "it did not pass the scope and secret checks",
        )
    if mode is LandMode.PR:
        from assay.engine.local.pull_request import (
            land_pull_request,  # its GitHub client: only here
        )

        # Push and open the PR; any failure leaves the branch and says why (never raises).
        landing = land_pull_request(
            plan,
            branch,
            fx.operator_env,
            blocked=blocked,
            failures=failures,
            record=fx.record_landing,
        )
        if landing.warning:
            fx.warn(landing.warning)
        return landing.outcome
    if blocked:  # only `pr` leaves anything for a blocked run
        left = f"branch {branch} left{_published(fx, plan, branch)}"
        return LandOutcome(RunStatus.BLOCKED, left, branch)
    if mode is LandMode.MERGE and plan.base_branch:
        if not plan.contract.verified and not plan.contract.land_unverified:
            reason = (
                "no validator verified the change (only scope and secret checks); "
                f"branch {branch} left instead of merging; to merge, give a validator that "
                "can block (--validator, or the contract's validators:) or land_unverified: true"
            )
            fx.warn(reason)
            return LandOutcome(RunStatus.READY, reason + _published(fx, plan, branch), branch)
        return merge_squashed(fx, plan, seat, branch, plan.base_branch, attempts)
    if mode is LandMode.MERGE:
        fx.warn(f"the base is a detached HEAD; branch {branch} left instead of merging")
    left = f"the change is left on branch {branch}{_published(fx, plan, branch)}"
    return LandOutcome(RunStatus.READY, left, branch)


def merge_squashed(
    fx: RunSite,
    plan: RunPlan,
    seat: Candidate,
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
        return _revalidate(fx, plan, seat, combined, tip)

    try:
        with land_lock(fx.home):
            land: Callable[..., str] = (
                functools.partial(origin.push_squash, remote=plan.origin)
                if plan.origin is not None
                else functools.partial(
                    landing.land_squash, moved=lambda: crash_point(CrashPoint.CHECKOUT_PENDING)
                )
            )
            commit = land(
                plan.repo_root,
                branch=branch,
                into_branch=into,
                base_commit=plan.base_commit,
                message=message,
                revalidate=revalidate,
                validated=fx.validated,
                assay_homes=fx.seating.assay_homes(plan),
            )
    except landing.LandBlocked as moved:
        left = _published(fx, plan, branch)
        return LandOutcome(
            RunStatus.BLOCKED, f"{moved}{left}", branch, validations=len(revalidations)
        )
    except origin.OriginError as failed:
        said = f"{failed}; the change is left on branch {branch}"
        fx.warn(f"merge failed: {said}")
        network = origin.failed_on_the_network(str(failed))  # else the remote's word (a hook)
        return LandOutcome(
            RunStatus.READY if network else RunStatus.BLOCKED,
            f"not merged: {said}",
            branch,
            validations=len(revalidations),
            machine_fault=network,  # lands in a later run
            refused=not network,  # a human's to resolve
            refusal=f"the push to {plan.origin} was refused",
        )
    except landing.LandRefused as refused:
        said = f"{refused}; the change is left on branch {branch}{_published(fx, plan, branch)}"
        fx.warn(f"merge refused: {said}")
        return LandOutcome(
            RunStatus.READY, f"not merged: {said}", branch, validations=len(revalidations)
        )
    where = f"{into} on {plan.origin}" if plan.origin else into
    return LandOutcome(
        RunStatus.MERGED,
        f"merged into {where} as one commit, {commit[:12]}",
        branch,
        validations=len(revalidations),
    )


def _published(fx: RunSite, plan: RunPlan, branch: str) -> str:
    """With an origin, a branch left for a human goes there too (any machine sees it); what
    became of it, as the end of a sentence ("" without an origin)."""
    if plan.origin is None:
        return ""
    try:
        origin.push_branch(plan.repo_root, plan.origin, branch)
    except origin.OriginError as exc:
        fx.warn(str(exc))
        return f" (here only: {exc})"
    return f", pushed to {plan.origin}"


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


def _revalidate(fx: RunSite, plan: RunPlan, seat: Candidate, combined: str, tip: str) -> str | None:
    """Run the validators on ``combined`` (the change applied to the moved base's ``tip``),
    each command validator in a fresh checkout of it. None: they pass."""
    store = fx.seating.store(plan, seat.seat)
    change = store.changes(tip, combined)
    # Called from the landing thread, which runs no event loop of its own.
    outcomes = asyncio.run(fx.validate_candidate(plan, seat, change, combined))
    results = [o.result for o in outcomes]
    decision = decide(results, plan.contract.policy, plan.contract.threshold)
    if decision.action is PolicyAction.PROCEED and all(o.fire is None for o in outcomes):
        return None
    failed = [r for r in results if r.halts or r.blocks] or results
    return "the validators block: " + "; ".join(
        f"{r.validator_id}: {failure_detail(r)}"[:300] for r in failed
    )


@contextlib.contextmanager
def land_lock(home: Path) -> Iterator[None]:
    """Landings of one repository's runs happen one at a time, across threads and processes
    (the compare-and-swap still guards against anyone else moving the branch)."""
    with halt_files.locked(home / "land", create_dir=True):
        yield
