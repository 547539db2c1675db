"""Talking to Temporal from outside a worker: connect, submit a task's run, stop it."""

from __future__ import annotations

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from assay.engine.temporal.calls import RunInput, RunOutcome, StopRequest
from assay.engine.temporal.config import DEFAULT_NAMESPACE, STOP_SIGNAL, Timeouts, workflow_id
from assay.engine.temporal.workflow import RunWorkflow


class TemporalUnreachable(Exception):
    """No Temporal server answers at the address given."""


async def connect(target: str, namespace: str = DEFAULT_NAMESPACE) -> Client:
    try:
        return await Client.connect(
            target, namespace=namespace, data_converter=pydantic_data_converter
        )
    except RuntimeError as exc:  # the SDK's connection failure
        raise TemporalUnreachable(f"cannot reach Temporal at {target}: {exc}") from exc


async def submit(
    client: Client,
    task_id: str,
    *,
    task_queue: str,
    timeouts: Timeouts | None = None,
    keep_worktrees: bool = False,
) -> WorkflowHandle[RunWorkflow, RunOutcome] | None:
    """Start the task's workflow; ``None`` when one is running for it already (never two)."""
    run = RunInput(
        task_id=task_id,
        task_queue=task_queue,
        keep_worktrees=keep_worktrees,
        timeouts=timeouts or Timeouts(),
    )
    try:
        return await client.start_workflow(
            RunWorkflow.run,
            run,
            id=workflow_id(task_id),
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        )
    except WorkflowAlreadyStartedError:
        return None


async def running(client: Client, task_id: str) -> bool:
    """Whether the task's workflow is running now."""
    try:
        described = await client.get_workflow_handle(workflow_id(task_id)).describe()
    except RPCError:  # never started
        return False
    return described.status is WorkflowExecutionStatus.RUNNING


async def stop(client: Client, task_id: str, reason: str) -> bool:
    """Signal the task's running workflow to stop its run and hold the task; False when no
    workflow of the task is running."""
    if not await running(client, task_id):
        return False
    handle = client.get_workflow_handle(workflow_id(task_id))
    try:
        await handle.signal(STOP_SIGNAL, StopRequest(reason))
    except RPCError:  # it closed in between
        return False
    return True


async def outcome(client: Client, task_id: str) -> RunOutcome:
    """Wait for the task's latest workflow and return what it came to."""
    handle = client.get_workflow_handle(workflow_id(task_id), result_type=RunOutcome)
    result: RunOutcome = await handle.result()
    return result
