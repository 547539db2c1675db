"""Talking to Temporal from outside a worker: connect, submit a task's run, stop it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.service import RPCError, RPCStatusCode, TLSConfig

from assay.adapters.temporal_connection import (
    ConnectionSettingsError,
    Credentials,
    TemporalConnection,
)
from assay.core.text import address_shown
from assay.engine.temporal.calls import RunInput, RunOutcome, StopRequest
from assay.engine.temporal.codec import data_converter
from assay.engine.temporal.config import STOP_SIGNAL, Timeouts, workflow_id
from assay.engine.temporal.workflow import RunWorkflow


class TemporalUnreachable(Exception):
    """No Temporal server answers at the address given (or it refused the credentials)."""


def connect_options(credentials: Credentials, namespace: str) -> dict[str, Any]:
    """What ``Client.connect`` is given beside the address: TLS from the PEM files (a client
    certificate: mTLS; no CA: the system's roots), and the API key, which never travels
    without TLS (the SDK sends it as a bearer token)."""
    tls: TLSConfig | bool = bool(credentials.api_key)
    if credentials.tls:
        tls = TLSConfig(
            server_root_ca_cert=credentials.server_ca,
            client_cert=credentials.client_cert,
            client_private_key=credentials.client_key,
        )
    return {
        "namespace": namespace,
        "data_converter": data_converter(credentials.codec_key),
        "tls": tls,
        "api_key": credentials.api_key,
    }


def metrics_runtime(bind: str) -> Runtime:
    """A runtime whose SDK metrics (workflow and activity task latencies, polls, slots, RPCs)
    are served for Prometheus at ``http://BIND/metrics``; :class:`TemporalUnreachable` when
    ``bind`` is no ``HOST:PORT`` it can listen on."""
    try:
        return Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=bind)))
    except Exception as exc:  # the SDK's core refuses the address (taken, not HOST:PORT)
        raise TemporalUnreachable(f"cannot serve metrics on {bind}: {exc}") from exc


async def connect(
    connection: TemporalConnection,
    environ: Mapping[str, str] | None = None,
    *,
    runtime: Runtime | None = None,
) -> Client:
    """A client of ``connection``'s server (its metrics through ``runtime`` when given);
    :class:`TemporalUnreachable` when its credentials cannot be read, or the server cannot be
    reached or refuses them."""
    try:
        credentials = connection.credentials(environ)
    except ConnectionSettingsError as exc:  # checked at start; a file may have gone since
        raise TemporalUnreachable(str(exc)) from exc
    options = connect_options(credentials, connection.namespace)
    if runtime is not None:
        options["runtime"] = runtime
    try:
        client = await Client.connect(connection.target, **options)
    except RuntimeError as exc:  # the SDK's connection failure
        hint = ""
        if connection.tls_cert is None and connection.api_key_env is None:
            hint = (
                "; a server that wants a client certificate or an API key refuses a client "
                "without one (--tls-cert/--tls-key, --api-key-env; --tls-ca for its CA)"
            )
        where = address_shown(connection.target)
        raise TemporalUnreachable(
            f"cannot reach Temporal at {where} ({connection.describe()}): {exc}{hint}"
        ) from exc
    await _namespace_exists(client, connection)
    return client


async def _namespace_exists(client: Client, connection: TemporalConnection) -> None:
    """A namespace the server does not have is named now, not by the first poll after a
    worker said it was ready. A server that will not say (a key without the right) is
    trusted: its first call tells."""
    request = DescribeNamespaceRequest(namespace=connection.namespace)
    try:
        await client.workflow_service.describe_namespace(request)
    except RPCError as exc:
        if exc.status is not RPCStatusCode.NOT_FOUND:
            return
        where = address_shown(connection.target)
        raise TemporalUnreachable(
            f"Temporal at {where} has no namespace {connection.namespace!r}: create it "
            f"(temporal operator namespace create --namespace {connection.namespace}) "
            "or name one it has (--namespace)"
        ) from exc


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
