"""settle(): the retry policy, a table mapping a finished run's verdict onto its task.

Kept pure and apart from the engine so the policy can be checked without running a graph.
Rows, in match order (the first that holds wins):

| row                    | condition                              | task becomes    | spent |
|------------------------|----------------------------------------|-----------------|-------|
| parked                 | parked at a boundary                   | Failed (stall)¹ | no    |
| succeeded              | merged or ready                        | Done            | yes   |
| unrunnable             | a program or key it needs is missing   | Held (machine)  | no    |
| stalled_quota          | stalled, quota hit                     | Failed (stall)  | no    |
| failed_quota_no_viable | failed, quota hit, no viable candidate | Failed (stall)  | no    |
| failed_machine_fault   | failed on a machine fault              | Failed (stall)  | no    |
| stalled_or_failed      | stalled or failed otherwise            | Failed, or Held | yes   |
| halted                 | a block halt fired                     | Held (machine)  | yes   |
| land_refused           | blocked: its landing was refused       | Held (machine)  | yes   |
| blocked_with_pr        | blocked and left a PR                  | Held (machine)  | yes   |
| blocked                | blocked otherwise                      | Failed, or Held | yes   |
| verified_noop          | all candidates say nothing to change   | Held (machine)  | yes   |
| non_terminal           | the run stopped mid-flight (a bug)     | Failed, or Held | yes   |

¹ Held (manual) instead when the run's own user stopped it (``stopped``: Ctrl-C on ``assay
run``): a task someone stopped stays stopped until a human releases it; the attempt is still
refunded (the stop says nothing about the task), and it never counts towards a refund streak's
hold. A run parked any other way (its process died, its queue worker stopped) runs again.

``unrunnable``: a seat or judge could not start because of a setting the operator controls on
this machine (its program is not installed or is hidden by the sandbox, its API key is not set
or was refused). Waiting cannot fix that and a retry would fail the same way, so the task is
Held (machine) with the message at once, and the attempt is given back (the run said nothing
about the task). It matches before the quota and fault rows: a wave lost partly to quota and
partly to a missing program still needs the operator first.

Only the four machine-fact rows (and ``unrunnable``) refund the attempt: a quota, a provider
fault, an environment error, a landing that failed on the network, or a parking boundary says
nothing about the task.
``machine_fault`` is set by the engine only when such a fault is the whole cause: every seat
was lost to quota, a provider fault (5xx, 529, a lost connection) or the environment, or a
passing candidate could not land because GitHub or the network failed. It matches after the
quota rows, so a wave lost partly to quota is still a quota row (and waits for its reset). The
``no_viable_candidates`` guard keeps the failed-quota row narrow: a run that produced a real
candidate and lost for another reason spends its attempt, so ``max_attempts`` still bounds the
retries. Unverified claims (a halt, a PR, a no-op) go to a human as Held, never to Done, and
so does a passing candidate whose landing was refused (GitHub answered 401, 403 or 422, a
setting is missing): retrying cannot fix a token, and a pull request never opened is not Done.

Refunds are bounded too. The caller reads from the ledger how many refunded runs in a row the
task had before this one (since its last release) and passes that :class:`RefundStreak` in,
so settle stays pure. When a refund row would make ``max_refunds`` refunded runs in a row, the
attempt is still refunded but the task is Held (machine), its reason listing the faults: a
machine fault that never clears (a provider down for days, a run killed at every try) reaches
a human instead of looping.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from assay.core.tasks import Task, TaskTransitionError, check_max_attempts
from assay.core.vocab import RunStatus, SettleRow, TaskStatus

REFUND_ROWS: frozenset[SettleRow] = frozenset(
    {
        SettleRow.PARKED,
        SettleRow.STALLED_QUOTA,
        SettleRow.FAILED_QUOTA_NO_VIABLE,
        SettleRow.FAILED_MACHINE_FAULT,
    }
)
"""The machine-fact rows: they give the attempt back and count towards the refund streak."""

UNSPENT_ROWS: frozenset[SettleRow] = REFUND_ROWS | {SettleRow.UNRUNNABLE}
"""Every row that gives the attempt back: the machine facts, and a setting this machine lacks."""

DEFAULT_MAX_REFUNDS = 3
FAULTS_LISTED = 3
"""How many of the earlier faults a refund-streak hold reason lists (the newest)."""


class RefundStreak(BaseModel):
    """The refunded runs in a row just before this one, since the task's last release."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    count: int = Field(default=0, ge=0)
    faults: tuple[str, ...] = ()  # their reasons, oldest first

    @classmethod
    def of(cls, runs: Iterable[tuple[SettleRow | None, str | None]]) -> RefundStreak:
        """The streak at the end of ``runs`` (closed runs' settle row and reason, oldest
        first): the refunded runs after the last one that was not refunded."""
        faults: list[str] = []
        for row, reason in runs:
            faults = [*faults, reason or str(row)] if row in REFUND_ROWS else []
        return cls(count=len(faults), faults=tuple(faults))


class Verdict(BaseModel):
    """What a finished run says about itself, as settle needs it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: RunStatus
    left_pr: bool = False
    quota_hit: bool = False
    parked: bool = False
    no_viable_candidates: bool = False
    machine_fault: bool = False
    land_refused: bool = False
    halted: bool = False
    unrunnable: bool = False  # a program or key the operator sets is missing on this machine


class Settlement(BaseModel):
    """What settle did to the task: the row that matched, the new status, whether it cost."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    row: SettleRow
    new_status: TaskStatus
    attempt_spent: bool


def settle_row(verdict: Verdict) -> SettleRow:
    """The table row that matches ``verdict``, in match order. Pure; touches no task."""
    status = verdict.status
    if verdict.parked:
        return SettleRow.PARKED
    if status in (RunStatus.MERGED, RunStatus.READY):
        return SettleRow.SUCCEEDED
    if verdict.unrunnable:
        return SettleRow.UNRUNNABLE
    if status == RunStatus.STALLED and verdict.quota_hit:
        return SettleRow.STALLED_QUOTA
    if status == RunStatus.FAILED and verdict.quota_hit and verdict.no_viable_candidates:
        return SettleRow.FAILED_QUOTA_NO_VIABLE
    if status == RunStatus.FAILED and verdict.machine_fault:
        return SettleRow.FAILED_MACHINE_FAULT
    if status in (RunStatus.STALLED, RunStatus.FAILED):
        return SettleRow.STALLED_OR_FAILED
    if verdict.halted:
        return SettleRow.HALTED
    if status == RunStatus.BLOCKED and verdict.land_refused:
        return SettleRow.LAND_REFUSED
    if status == RunStatus.BLOCKED:
        return SettleRow.BLOCKED_WITH_PR if verdict.left_pr else SettleRow.BLOCKED
    if status == RunStatus.VERIFIED_NOOP:
        return SettleRow.VERIFIED_NOOP
    return SettleRow.NON_TERMINAL


def non_terminal_detail(status: RunStatus) -> str:
    """The failure recorded when a run returned mid-flight; the caller's detail is not used."""
    return f"the run stopped at `{status}` without reaching a terminal status"


def settle(
    task: Task,
    verdict: Verdict,
    detail: str,
    max_attempts: int,
    now: AwareDatetime,
    *,
    refunds: RefundStreak | None = None,
    max_refunds: int = DEFAULT_MAX_REFUNDS,
    stopped: str | None = None,
) -> Settlement:
    """Record a finished run against the task it came from, which must be running.

    The run's ``start()`` already spent the attempt; ``unrunnable`` gives it back and holds
    the task (``cannot_run``); a refund row gives it back through
    ``stall()``, or through ``refunds_exhausted()`` (Held, machine) when ``refunds`` (the
    refunded runs in a row before this one) plus this one reach ``max_refunds``. A parked run
    its user stopped (``stopped``: the hold reason) is refunded and the task Held (manual). Raises
    ``TaskTransitionError`` if the task is not running and ``ValueError`` if ``max_attempts``
    or ``max_refunds`` is below 1, in both cases before changing anything.
    """
    check_max_attempts(max_attempts)
    if max_refunds < 1:
        raise ValueError(f"max_refunds must be at least 1, got {max_refunds}")
    if task.status != TaskStatus.RUNNING:
        raise TaskTransitionError(task.id, "settle", task.status, frozenset({TaskStatus.RUNNING}))
    streak = refunds or RefundStreak()
    row = settle_row(verdict)
    match row:
        case (
            SettleRow.PARKED
            | SettleRow.STALLED_QUOTA
            | SettleRow.FAILED_QUOTA_NO_VIABLE
            | SettleRow.FAILED_MACHINE_FAULT
        ):
            if row is SettleRow.PARKED and stopped is not None:
                task.stall(detail, now)
                task.hold(stopped, now)
            elif streak.count + 1 >= max_refunds:
                task.refunds_exhausted(refund_hold_reason(streak, detail, max_refunds), now)
            else:
                task.stall(detail, now)
        case SettleRow.SUCCEEDED:
            task.succeed(now)
        case SettleRow.UNRUNNABLE:
            task.cannot_run(detail, now)
        case SettleRow.STALLED_OR_FAILED | SettleRow.BLOCKED:
            task.fail(detail, max_attempts, now)
        case (
            SettleRow.HALTED
            | SettleRow.LAND_REFUSED
            | SettleRow.BLOCKED_WITH_PR
            | SettleRow.VERIFIED_NOOP
        ):
            task.handed_off(detail, now)
        case SettleRow.NON_TERMINAL:
            task.fail(non_terminal_detail(verdict.status), max_attempts, now)
    return Settlement(row=row, new_status=task.status, attempt_spent=row not in UNSPENT_ROWS)


def refund_hold_reason(streak: RefundStreak, detail: str, max_refunds: int) -> str:
    """Why a task was held after ``max_refunds`` refunded runs in a row, with the faults."""
    reason = (
        f"{streak.count + 1} refunded runs in a row (budgets.max_refunds: {max_refunds}); "
        f"a machine fault that does not clear needs a human. Last: {detail}"
    )
    earlier = streak.faults[-FAULTS_LISTED:]
    if earlier:
        reason += " | before: " + " | ".join(earlier)
    return reason[:4000]
