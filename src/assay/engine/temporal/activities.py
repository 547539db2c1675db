"""The activities of a worker process: opening and closing runs against the ledger.

One :class:`Activities` per worker process. ``open`` (polled on the shared queue and on its
repository's) refuses a task of another repository than the worker's (never claimed, never
held: the workflow asks again, and that repository's worker takes it), checks the task can run
here, builds the local executor's effects for the run, claims the task and holds
the run on this worker (:class:`~assay.engine.temporal.holding.RunsHeld` performs every later
effect of it). ``close`` closes a run its graph never recorded, once, from the ledger's
journal (:func:`assay.engine.recovery.close.close_unfinished`: the one close recovery uses).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from assay.adapters.envpolicy import contract_leak
from assay.adapters.origin import OriginError
from assay.adapters.process_groups import stop_recorded_groups
from assay.adapters.store.sql import Ledger, LedgerConflict, RunNotFound
from assay.core.contract import Contract
from assay.core.tasks import RUNNABLE_STATUSES, Task, TaskTransitionError
from assay.engine.admission import Unrunnable, admit
from assay.engine.effects import OpenRequest
from assay.engine.recovery.close import close_unfinished
from assay.engine.temporal.calls import Closed, CloseIn, Opened
from assay.engine.temporal.effects import ORIGIN_UNREACHABLE, RUN_NOT_HELD, WORKER_STOPPING
from assay.engine.temporal.holding import RunEffects, RunsHeld

Clock = Callable[[], datetime]
EffectsFor = Callable[[Task, Contract], RunEffects]
OTHER_REPOSITORY = "OtherRepository"  # a close reached a worker of another repository: retried


def utc_now() -> datetime:
    return datetime.now(UTC)


class Activities(RunsHeld):
    """The activities of one worker; ``queue`` is its own task queue, ``repository`` the id
    of the repository it serves (:mod:`assay.adapters.repo_identity`)."""

    def __init__(
        self,
        *,
        queue: str,
        repo: Path,
        home: Path,
        ledger: Ledger,
        effects_for: EffectsFor,
        contract_for: Callable[[str], Contract],
        max_dispatches: int = 4,
        heartbeat_every: float = 2.0,
        env: Mapping[str, str] | None = None,
        clock: Clock = utc_now,
        repository: str | None = None,
    ) -> None:
        super().__init__(
            queue=queue, max_dispatches=max_dispatches, heartbeat_every=heartbeat_every
        )
        self.repo = repo
        self.home = home
        self.ledger = ledger
        self.effects_for = effects_for
        self.contract_for = contract_for
        self.env = env
        self.clock = clock
        self.repository = repository

    # -- the run's life ----------------------------------------------------------------------

    async def open(self, call: OpenRequest) -> Opened:
        async with self._beating(lambda: {"opening": call.run_id}):
            held = self.runs.get(call.run_id)
            if held is not None and held.opened is not None:  # retried, reached this worker
                return held.opened
            try:
                record = await asyncio.to_thread(self.ledger.get_run, call.run_id)
            except RunNotFound:
                record = None
            if record is not None:  # an earlier try opened it on a worker that died since
                raise ApplicationError(
                    f"run {call.run_id} was opened by a worker lost since",
                    type=RUN_NOT_HELD,
                    non_retryable=True,
                )
            task = await asyncio.to_thread(self.ledger.get_task, call.task_id)
            self._refuse_elsewhere(task, opening=True)
            if not task.runnable(self.clock()):
                why = f"task {task.id} is {task.status.value}, not runnable"
                return Opened(None, not_runnable=why)
            try:
                contract = await asyncio.to_thread(self.contract_for, task.id)
            except Exception as exc:  # unreadable or missing: nothing can run it
                why = f"task {task.id}: its contract cannot be read: {exc}"
                return Opened(None, not_runnable=why)
            leak = contract_leak(contract, os.environ if self.env is None else self.env)
            if leak is not None:  # as `assay run` refuses it: nothing of it starts here
                why = f"task {task.id}: the contract cannot run: {leak}"
                return Opened(None, not_runnable=why)
            try:  # a program or key this worker lacks: held, as `assay serve` holds it
                await asyncio.to_thread(
                    admit,
                    ledger=self.ledger,
                    task=task,
                    contract=contract,
                    repo=self.repo,
                    home=self.home,
                    now=self.clock(),
                    env=self.env,
                )
            except Unrunnable as why:
                return Opened(None, not_runnable=f"task {task.id} is held: {why}")
            except LedgerConflict as exc:  # another worker claimed (or held) it first
                return Opened(None, not_runnable=str(exc))
            fx = self.effects_for(task, contract)
            try:
                return await self.hold(fx, call)
            except LedgerConflict as exc:  # another run claimed it first
                fx.close()
                return Opened(None, not_runnable=str(exc))
            except OriginError as exc:  # before the task was claimed: it stays queued
                fx.close()
                said = f"task {task.id} waits: {exc}"
                activity.logger.warning(said)
                raise ApplicationError(said, type=ORIGIN_UNREACHABLE, non_retryable=True) from exc

    def _refuse_elsewhere(self, task: Task, *, opening: bool) -> None:
        """Another repository's task is never touched here. An open is refused as a stopping
        worker refuses one (the workflow asks again, and that repository's worker takes it);
        a close is retried (on any worker, until that repository's closes it)."""
        if not task.belongs_elsewhere(self.repository):
            return
        said = (
            f"task {task.id} belongs to the repository {task.repository}; this worker serves "
            f"{self.repository}: it does not {'open' if opening else 'close'} its run"
        )
        activity.logger.warning(said)
        if opening:
            raise ApplicationError(said, type=WORKER_STOPPING, non_retryable=True)
        raise ApplicationError(said, type=OTHER_REPOSITORY)

    async def close(self, call: CloseIn) -> Closed:
        """Close ``call.run_id`` if it is still open (once: a closed run is never closed again)
        and hold the task if asked; here, the run's coders are stopped and its seats removed."""
        async with self._beating(lambda: {"closing": call.run_id}):
            held = self.runs.get(call.run_id) if call.run_id else None
            if held is None:  # closed from the journal: only by a worker of its repository
                task = await asyncio.to_thread(self.ledger.get_task, call.task_id)
                self._refuse_elsewhere(task, opening=False)
            if held is not None:
                await asyncio.to_thread(stop_recorded_groups, held.groups)
                self._let_go(held.handle.plan.run_id)
            return await asyncio.to_thread(self._close, call)

    def _close(self, call: CloseIn) -> Closed:
        status: str | None = None
        closed_now = False
        if call.run_id is not None:
            try:
                record = self.ledger.get_run(call.run_id)
            except RunNotFound:
                record = None
            if record is not None and record.open:
                contract = call.contract or self.contract_for(call.task_id)
                try:
                    found = close_unfinished(
                        repo=self.repo,
                        home=self.home,
                        ledger=self.ledger,
                        record=record,
                        contract=contract,
                        reason=call.reason,
                        clock=self.clock,
                        env=self.env,
                        # a seat it cannot remove stays for `assay gc`, said in the worker's log
                        warn=activity.logger.warning,
                    )
                    status, closed_now = found.value, True
                except LedgerConflict:  # its own record, or another close, came first
                    record = self.ledger.get_run(call.run_id)
            if record is not None and not closed_now:
                status = record.status.value
        task = self.ledger.get_task(call.task_id)
        if call.hold is not None and task.status in RUNNABLE_STATUSES:
            task = self._hold(task, call, call.hold)
        return Closed(
            run_id=call.run_id,
            status=status,
            closed_now=closed_now,
            task=task,
            runnable=task.runnable(self.clock()),
        )

    def _hold(self, task: Task, call: CloseIn, reason: str) -> Task:
        """Hold the task its operator stopped, recorded with who asked (a ``task.saved``
        event with the action, by and via) when the stop said; a move that lost a race
        (the task changed meanwhile) leaves the task as it is now."""
        now = self.clock()
        if call.by is None:  # a workflow cancelled in Temporal itself: nobody to name
            task.hold(reason, now)
            self.ledger.save_task(task)
            return task

        def apply(current: Task) -> dict[str, Any]:
            current.hold(reason, now)
            return {"action": call.action, "by": call.by, "via": call.via, "reason": reason}

        try:
            return self.ledger.change_task(call.task_id, apply)
        except (TaskTransitionError, LedgerConflict):
            return self.ledger.get_task(call.task_id)

    async def sweep(self) -> list[str]:
        """Let go of runs held here that the ledger has closed meanwhile (their workflow closed
        them elsewhere: stopped while its open was in flight, or this worker thought lost),
        so they no longer count against the runs this worker may hold."""
        gone = []
        for run_id, held in list(self.runs.items()):
            try:
                record = await asyncio.to_thread(self.ledger.get_run, run_id)
            except RunNotFound:
                continue
            if not record.open:
                await asyncio.to_thread(stop_recorded_groups, held.groups)
                self._let_go(run_id)
                gone.append(run_id)
        return gone


__all__ = ["Activities", "EffectsFor"]
