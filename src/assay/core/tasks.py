"""A task and its lifecycle.

Every move is a method that checks the task's current status first and raises
``TaskTransitionError`` on a move the lifecycle does not allow, so a caller bug shows up as a
clear error instead of a task in an impossible state. Time is always passed in: ``core`` never
reads a clock.
"""

from __future__ import annotations

from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from assay.core.vocab import HoldSource, TaskStatus

RUNNABLE_STATUSES: frozenset[TaskStatus] = frozenset({TaskStatus.QUEUED, TaskStatus.FAILED})
"""Statuses a worker may pick a task up from."""


class TaskTransitionError(Exception):
    """A lifecycle move was asked of a task whose status does not allow it.

    The task is left exactly as it was.
    """

    def __init__(self, task_id: str, move: str, status: TaskStatus, allowed: frozenset[TaskStatus]):
        self.task_id = task_id
        self.move = move
        self.status = status
        self.allowed = allowed
        expected = " or ".join(sorted(allowed))
        super().__init__(
            f"task {task_id!r}: cannot {move} a task that is {status} (it must be {expected})"
        )


_RUNNING = frozenset({TaskStatus.RUNNING})
_HELD = frozenset({TaskStatus.HELD})


class Task(BaseModel):
    """A unit of work and where it stands.

    ``attempts`` counts the runs spent against ``max_attempts``. The store fills it from the
    ledger; here it is a plain field. ``run_ids`` and ``last_error`` are history: no move
    clears them. ``diagnostic`` is free text a caller may attach; no move touches it.
    ``not_before`` is a machine wait (a provider's quota): until then the task is not runnable,
    though its status still says it may run. A wait is a scheduling rule, not a lifecycle
    state, so ``start`` does not check it: a caller that means to run now may.
    ``repository`` and ``branch`` are where it was queued: the id of the repository it belongs
    to (only that repository's workers run it; None, as for a task queued before tasks kept
    it: any worker) and the branch it targets. No move touches them.
    """

    model_config = ConfigDict(extra="ignore", validate_assignment=True)

    id: str = Field(min_length=1)
    title: str
    instruction: str
    status: TaskStatus = TaskStatus.QUEUED
    attempts: int = Field(default=0, ge=0)
    last_error: str | None = None
    hold_reason: str | None = None
    hold_source: HoldSource | None = None
    diagnostic: str | None = None
    run_ids: list[str] = Field(default_factory=list)
    not_before: AwareDatetime | None = None
    created_at: AwareDatetime
    updated_at: AwareDatetime
    repository: str | None = None
    branch: str | None = None

    @classmethod
    def new(
        cls,
        *,
        id: str,
        title: str,
        instruction: str,
        now: AwareDatetime,
        repository: str | None = None,
        branch: str | None = None,
    ) -> Task:
        """A fresh queued task created at ``now``."""
        return cls(
            id=id,
            title=title,
            instruction=instruction,
            created_at=now,
            updated_at=now,
            repository=repository,
            branch=branch,
        )

    def belongs_elsewhere(self, repository: str | None) -> bool:
        """Whether the task is another repository's than ``repository`` (a worker's): it
        names one, and not that one. A task that names none runs anywhere."""
        return self.repository is not None and self.repository != repository

    def runnable(self, now: AwareDatetime) -> bool:
        """Whether a worker may start this task at ``now``: it is queued, or failed and
        requeued, and not waiting (``now`` is at or past ``not_before``)."""
        return self.status in RUNNABLE_STATUSES and not self.waiting(now)

    def waiting(self, now: AwareDatetime) -> bool:
        """Whether a machine wait (``not_before``) is still ahead of ``now``."""
        return self.not_before is not None and now < self.not_before

    def start(self, now: AwareDatetime, *, run_id: str | None = None) -> None:
        """Begin a run: the attempt is spent up front, so a crash mid-run still counts it.

        Allowed from queued or failed. ``run_id``, when given, is appended to ``run_ids``; a
        run id the task already has raises ``ValueError``. Any wait is cleared: the run it
        deferred is this one, and its own close decides whether to wait again.
        """
        self._require("start", RUNNABLE_STATUSES)
        changes: dict[str, Any] = {
            "status": TaskStatus.RUNNING,
            "attempts": self.attempts + 1,
            "not_before": None,
        }
        if run_id is not None:
            if run_id in self.run_ids:
                raise ValueError(f"task {self.id!r}: run {run_id!r} is already recorded")
            changes["run_ids"] = [*self.run_ids, run_id]
        self._apply(now, changes)

    def stall(self, detail: str, now: AwareDatetime) -> None:
        """The run ended on a machine fact (quota, parking): Failed, and the attempt refunded.

        The refund never takes ``attempts`` below zero. Allowed from running only.
        """
        self._require("stall", _RUNNING)
        self._apply(
            now,
            {
                "status": TaskStatus.FAILED,
                "attempts": max(0, self.attempts - 1),
                "last_error": detail,
            },
        )

    def refunds_exhausted(self, reason: str, now: AwareDatetime) -> None:
        """A refunded run that ends a streak of ``max_refunds`` in a row: the attempt is given
        back as by ``stall``, but the task is Held (machine) with ``reason``, so a machine fault
        that never clears reaches a human instead of looping. Allowed from running only."""
        self._require("hold after refunds", _RUNNING)
        self._apply(
            now,
            {
                "status": TaskStatus.HELD,
                "attempts": max(0, self.attempts - 1),
                "last_error": reason,
                "hold_source": HoldSource.MACHINE,
                "hold_reason": reason,
            },
        )

    def cannot_run(self, reason: str, now: AwareDatetime) -> None:
        """This machine cannot run the task's settings (a program not installed, a key not
        set): Held (machine) with ``reason``, never retried, for the operator to fix and
        release. From queued or failed (found before a run) attempts are untouched; from
        running (found during one) the attempt its ``start`` spent is given back, since the
        run said nothing about the task."""
        self._require("hold as unrunnable", RUNNABLE_STATUSES | _RUNNING)
        refund = 1 if self.status is TaskStatus.RUNNING else 0
        self._apply(
            now,
            {
                "status": TaskStatus.HELD,
                "attempts": max(0, self.attempts - refund),
                "last_error": reason,
                "hold_source": HoldSource.MACHINE,
                "hold_reason": reason,
                "not_before": None,
            },
        )

    def fail(self, detail: str, max_attempts: int, now: AwareDatetime) -> None:
        """The run failed and the attempt stands: Failed, or Held (machine) once spent out.

        Held once ``attempts >= max_attempts``, so a task cannot retry forever. Allowed from
        running only; ``max_attempts`` below 1 raises ``ValueError``.
        """
        check_max_attempts(max_attempts)
        self._require("fail", _RUNNING)
        changes: dict[str, Any] = {"status": TaskStatus.FAILED, "last_error": detail}
        if self.attempts >= max_attempts:
            changes |= {
                "status": TaskStatus.HELD,
                "hold_source": HoldSource.MACHINE,
                "hold_reason": (
                    f"attempts exhausted ({self.attempts} of {max_attempts} spent): {detail}"
                ),
            }
        self._apply(now, changes)

    def wait_until(self, not_before: AwareDatetime, now: AwareDatetime) -> None:
        """A failed task may not run again before ``not_before`` (a provider's quota reset).

        Allowed from failed only: the wait follows a refunded run, and it is how settle's
        refund stays bounded in time when it cannot be bounded by ``max_attempts``.
        """
        self._require("set a wait on", frozenset({TaskStatus.FAILED}))
        self._apply(now, {"not_before": not_before})

    def skip_wait(self, now: AwareDatetime) -> None:
        """An operator lets a waiting task run now: the wait is cleared, attempts are kept.

        Allowed from queued or failed (a no-op apart from ``updated_at`` when nothing waits).
        """
        self._require("skip the wait of", RUNNABLE_STATUSES)
        self._apply(now, {"not_before": None})

    def succeed(self, now: AwareDatetime) -> None:
        """The run landed (merged or ready): Done. Allowed from running only."""
        self._require("succeed", _RUNNING)
        self._apply(now, {"status": TaskStatus.DONE})

    def handed_off(self, detail: str, now: AwareDatetime) -> None:
        """The run finished into a gate a human must pass (a PR, a halt, a no-op claim).

        Held (machine) with ``detail`` as the reason; the attempt stands. Held rather than
        Failed so nothing retries on an unverified claim. Allowed from running only.
        """
        self._require("hand off", _RUNNING)
        self._apply(
            now,
            {"status": TaskStatus.HELD, "hold_source": HoldSource.MACHINE, "hold_reason": detail},
        )

    def hold(self, reason: str, now: AwareDatetime) -> None:
        """An operator parks the task: Held (manual).

        Allowed from queued or failed only: a running task is settled by its run, and a held
        or done task has nothing to park. Any wait is cleared: the human now decides when.
        """
        self._require("hold", RUNNABLE_STATUSES)
        self._apply(
            now,
            {
                "status": TaskStatus.HELD,
                "hold_source": HoldSource.MANUAL,
                "hold_reason": reason,
                "not_before": None,
            },
        )

    def release(self, now: AwareDatetime) -> None:
        """A human lets a held task run again: Queued with a fresh attempt budget.

        The hold (and any wait) is cleared; ``run_ids`` and ``last_error`` are kept. Allowed
        from held only.
        """
        self._require("release", _HELD)
        self._apply(
            now,
            {
                "status": TaskStatus.QUEUED,
                "attempts": 0,
                "hold_reason": None,
                "hold_source": None,
                "not_before": None,
            },
        )

    def _require(self, move: str, allowed: frozenset[TaskStatus]) -> None:
        if self.status not in allowed:
            raise TaskTransitionError(self.id, move, self.status, allowed)

    def _apply(self, now: AwareDatetime, changes: dict[str, Any]) -> None:
        """Validate the whole new state first, then commit it: all of a move or none of it."""
        changes = {**changes, "updated_at": now}
        checked = self.model_validate({**self.model_dump(), **changes})
        for name in changes:
            setattr(self, name, getattr(checked, name))


def check_max_attempts(max_attempts: int) -> None:
    """Reject a budget that could never allow a run: ``ValueError`` below 1."""
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")


def how_to_stop(task_id: str) -> str:
    """How a running task's run is stopped, said wherever a move waits for that: no ledger
    move stops a run (its process settles the task), so the way is to ask the run to stop."""
    return (
        f"`assay task stop {task_id}` on the machine that runs it (a run on Temporal: "
        f"`ASSAY_TEMPORAL=HOST:PORT assay task stop {task_id}`), or Ctrl-C the `assay run` or "
        "`assay serve` that runs it; a run whose process is gone is closed by "
        "`assay run --resume`"
    )
