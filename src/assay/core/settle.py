"""settle(): the retry policy, a table mapping a finished run's verdict onto its task.

Kept pure and apart from the engine so the policy can be checked without running a graph.
Rows, in match order (the first that holds wins):

| row                    | condition                              | task becomes    | spent |
|------------------------|----------------------------------------|-----------------|-------|
| parked                 | parked at a boundary                   | Failed (stall)  | no    |
| succeeded              | merged or ready                        | Done            | yes   |
| stalled_quota          | stalled, quota hit                     | Failed (stall)  | no    |
| failed_quota_no_viable | failed, quota hit, no viable candidate | Failed (stall)  | no    |
| stalled_or_failed      | stalled or failed otherwise            | Failed, or Held | yes   |
| halted                 | a block halt fired                     | Held (machine)  | yes   |
| blocked_with_pr        | blocked and left a PR                  | Held (machine)  | yes   |
| blocked                | blocked otherwise                      | Failed, or Held | yes   |
| verified_noop          | all candidates say nothing to change   | Held (machine)  | yes   |
| non_terminal           | the run stopped mid-flight (a bug)     | Failed, or Held | yes   |

Only the three machine-fact rows refund the attempt: a quota or a parking boundary says
nothing about the task. The ``no_viable_candidates`` guard keeps the failed-quota row narrow: a
run that produced a real candidate and lost for another reason spends its attempt, so
``max_attempts`` still bounds the retries. Unverified claims (a halt, a PR, a no-op) go to a
human as Held, never to Done.
"""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, ConfigDict

from assay.core.tasks import Task, TaskTransitionError, check_max_attempts
from assay.core.vocab import RunStatus, SettleRow, TaskStatus

REFUND_ROWS: frozenset[SettleRow] = frozenset(
    {SettleRow.PARKED, SettleRow.STALLED_QUOTA, SettleRow.FAILED_QUOTA_NO_VIABLE}
)
"""The machine-fact rows: the only ones that give the attempt back."""


class Verdict(BaseModel):
    """What a finished run says about itself, as settle needs it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: RunStatus
    left_pr: bool = False
    quota_hit: bool = False
    parked: bool = False
    no_viable_candidates: bool = False
    halted: bool = False


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
    if status == RunStatus.STALLED and verdict.quota_hit:
        return SettleRow.STALLED_QUOTA
    if status == RunStatus.FAILED and verdict.quota_hit and verdict.no_viable_candidates:
        return SettleRow.FAILED_QUOTA_NO_VIABLE
    if status in (RunStatus.STALLED, RunStatus.FAILED):
        return SettleRow.STALLED_OR_FAILED
    if verdict.halted:
        return SettleRow.HALTED
    if status == RunStatus.BLOCKED:
        return SettleRow.BLOCKED_WITH_PR if verdict.left_pr else SettleRow.BLOCKED
    if status == RunStatus.VERIFIED_NOOP:
        return SettleRow.VERIFIED_NOOP
    return SettleRow.NON_TERMINAL


def non_terminal_detail(status: RunStatus) -> str:
    """The failure recorded when a run returned mid-flight; the caller's detail is not used."""
    return f"the run stopped at `{status}` without reaching a terminal status"


def settle(
    task: Task, verdict: Verdict, detail: str, max_attempts: int, now: AwareDatetime
) -> Settlement:
    """Record a finished run against the task it came from, which must be running.

    The run's ``start()`` already spent the attempt; a refund row gives it back through
    ``stall()``. Raises ``TaskTransitionError`` if the task is not running and ``ValueError``
    if ``max_attempts`` is below 1, in both cases before changing anything.
    """
    check_max_attempts(max_attempts)
    if task.status != TaskStatus.RUNNING:
        raise TaskTransitionError(task.id, "settle", task.status, frozenset({TaskStatus.RUNNING}))
    row = settle_row(verdict)
    match row:
        case SettleRow.PARKED | SettleRow.STALLED_QUOTA | SettleRow.FAILED_QUOTA_NO_VIABLE:
            task.stall(detail, now)
        case SettleRow.SUCCEEDED:
            task.succeed(now)
        case SettleRow.STALLED_OR_FAILED | SettleRow.BLOCKED:
            task.fail(detail, max_attempts, now)
        case SettleRow.HALTED | SettleRow.BLOCKED_WITH_PR | SettleRow.VERIFIED_NOOP:
            task.handed_off(detail, now)
        case SettleRow.NON_TERMINAL:
            task.fail(non_terminal_detail(verdict.status), max_attempts, now)
    return Settlement(row=row, new_status=task.status, attempt_spent=row not in REFUND_ROWS)
