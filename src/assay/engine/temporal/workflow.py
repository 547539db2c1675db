"""RunWorkflow: a task's run, as a Temporal workflow executing the engine's own graph.

One workflow per task at a time (its id, :func:`config.workflow_id`). It opens a run (an id it
draws deterministically, so a retried ``open`` never makes a second run) and runs
:func:`run_graph` with :class:`TemporalEffects`. When the run's worker is lost, the run is
closed once from its journal as an environment error (refunded through settle, whose refund
streak bounds how often) and a new run opens on another worker — unless settle held the task.
The ``stop`` signal (``assay task cancel|hold``) and a cancellation of the workflow stop the
graph: its activities are cancelled (the coders stopped), the run is closed as interrupted on
its worker (or, lost, anywhere) and the task is held. A workflow started with the search
attributes (:mod:`search`) keeps ``AssayStatus`` up to date as its run moves.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from assay.engine.effects import OpenRequest, RunRecorded, RunStopped
    from assay.engine.graph.run import run_graph
    from assay.engine.temporal.calls import (
        Closed,
        CloseIn,
        RunInput,
        RunOutcome,
        StopRequest,
    )
    from assay.engine.temporal.config import STOP_SIGNAL, WORKFLOW_NAME, close_queue
    from assay.engine.temporal.effects import NotRunnable, TemporalEffects, execute
    from assay.engine.temporal.search import (
        NOT_RUNNABLE,
        QUEUED,
        RUNNING,
        STATUS,
        STATUS_PATCH,
        TASK_ID,
    )
    from assay.engine.temporal.table import CLOSE

CANCELLED = "the workflow was cancelled"
LOST = "environment error: {lost}; the run starts again on another worker"


@workflow.defn(name=WORKFLOW_NAME)
class RunWorkflow:
    def __init__(self) -> None:
        self._stop: StopRequest | None = None
        self._graph: asyncio.Task[RunRecorded] | None = None
        self._run_id: str | None = None
        self._shown: str | None = None  # the AssayStatus upserted last; None: none kept

    @workflow.signal(name=STOP_SIGNAL)
    def stop(self, request: StopRequest) -> None:
        if self._stop is not None:
            return
        self._stop = request
        if self._graph is not None and not self._graph.done():
            self._graph.cancel()

    @workflow.query(name="run_id")
    def run_id(self) -> str | None:
        """The run open now (None between runs)."""
        return self._run_id

    @workflow.run
    async def run(self, run: RunInput) -> RunOutcome:
        # Started without the attributes, the namespace lacks them: an upsert would fail
        # every workflow task. Checked first so a history without them never sees the patch.
        started_with_them = workflow.info().typed_search_attributes.get(TASK_ID) is not None
        if started_with_them and workflow.patched(STATUS_PATCH):
            self._shown = QUEUED
        outcome = await self._runs(run)
        self._show(outcome.task_status or NOT_RUNNABLE)
        return outcome

    def _show(self, status: str) -> None:
        """``AssayStatus`` = ``status`` (the UI's column), when the workflow keeps it."""
        if self._shown is not None and self._shown != status:
            workflow.upsert_search_attributes([STATUS.value_set(status)])
            self._shown = status

    async def _runs(self, run: RunInput) -> RunOutcome:
        outcome = RunOutcome(task_id=run.task_id)
        for _ in range(run.max_runs):
            if self._stop is not None:  # before a run opened: only the hold is left to do
                closed = await self._close(run, None, None, self._stop, lost=True)
                return _stopped(outcome, closed, self._stop)
            fx = TemporalEffects(run)
            self._show(RUNNING)
            self._run_id = self._new_run_id()
            outcome.runs.append(self._run_id)
            request = OpenRequest(run.task_id, self._run_id, run.keep_worktrees)
            self._graph = asyncio.create_task(run_graph(request, fx))
            try:
                recorded = await self._ended(self._graph)
            except NotRunnable as why:
                outcome.runs.pop()
                outcome.note = str(why)
                return outcome
            except asyncio.CancelledError:  # stopped before its first activity
                stop = self._stop or StopRequest(CANCELLED)
                self._stop = stop
                closed = await self._close(run, fx, self._run_id, stop, lost=False)
                return _stopped(outcome, closed, stop)
            except RunStopped as lost:  # its worker lost, stopped, or it closed elsewhere
                if self._stop is not None:
                    closed = await self._close(run, fx, self._run_id, self._stop, lost=False)
                    return _stopped(outcome, closed, self._stop)
                outcome.lost += 1
                reason = LOST.format(lost=lost)
                closed = await self._close(run, fx, self._run_id, None, lost=True, reason=reason)
                outcome.status, outcome.task_status = closed.status, closed.task.status.value
                outcome.note = reason
                if self._stop is not None or not closed.runnable:
                    return outcome
                continue
            finally:
                self._graph = None
            outcome.status = recorded.status.value
            outcome.task_status = recorded.task.status.value
            outcome.payload_path = recorded.payload_path
            self._run_id = None
            return outcome
        outcome.note = f"stopped after {run.max_runs} lost worker(s) in a row"
        return outcome

    async def _ended(self, graph: asyncio.Task[RunRecorded]) -> RunRecorded:
        """The graph's end. A cancellation of the workflow stops it as the stop signal does:
        an activity cancelled under the graph reaches it as a stopped run (never as a lost
        worker, which would open the run again)."""
        try:
            return await asyncio.shield(graph)
        except asyncio.CancelledError:
            if graph.done():  # the graph itself was cancelled (by the stop signal)
                raise
            self.stop(StopRequest(CANCELLED))
            return await graph

    def _new_run_id(self) -> str:
        now = workflow.now()
        return f"r{now:%Y%m%d-%H%M%S}-{workflow.random().getrandbits(24):06x}"

    async def _close(
        self,
        run: RunInput,
        fx: TemporalEffects | None,
        run_id: str | None,
        stop: StopRequest | None,
        *,
        lost: bool,
        reason: str | None = None,
    ) -> Closed:
        """Close the run its graph did not record: on its own worker when that one lives (it
        stops the coders and removes the seats), else on any worker (from the journal)."""
        why = reason or f"interrupted: {stop.reason if stop else 'stopped'}"
        hold = stop.reason if stop is not None and stop.hold else None
        contract = fx.handle.plan.contract if fx is not None and fx.handle else None
        call = CloseIn(run.task_id, run_id, why, hold=hold, contract=contract)
        if stop is not None and stop.by is not None:  # recorded with who asked
            call = CloseIn(run.task_id, run_id, why, hold, contract, stop.by, stop.via, stop.action)
        worker = fx.worker if fx is not None else None
        if worker is not None and not lost:
            try:
                return await execute(CLOSE, call, queue=worker, timeouts=run.timeouts)
            except ActivityError:
                pass  # its worker is gone too: any worker closes it from the journal
        anywhere = close_queue(run.opens_on)  # its repository's workers (or any, for none)
        return await execute(CLOSE, call, queue=anywhere, timeouts=run.timeouts, until_done=True)


def _stopped(outcome: RunOutcome, closed: Closed, stop: StopRequest) -> RunOutcome:
    outcome.stopped = True
    outcome.status = closed.status
    outcome.task_status = closed.task.status.value
    outcome.note = stop.reason
    return outcome


__all__ = ["RunWorkflow"]
