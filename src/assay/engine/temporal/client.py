"""Talking to Temporal from outside a worker: connect, submit a task's run, stop it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.common import (
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
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
from assay.engine.temporal.config import STOP_SIGNAL, Timeouts, repository_queue, workflow_id
from assay.engine.temporal.search import KEYS, at_start, unregistered_warning
from assay.engine.temporal.workflow import RunWorkflow


class TemporalUnreachable(Exception):
    """No Temporal server answers at the address given (or it refused the credentials)."""


@dataclass
class _Indexing:
    """Whether a client's namespace has the search attributes (None: it would not say; the
    first start tells), and where to say once that it has not."""

    namespace: str
    usable: bool | None
    warn: Callable[[str], None]

    def drop(self, missing: list[str]) -> None:
        if self.usable is not False:
            self.usable = False
            self.warn(unregistered_warning(self.namespace, missing))


_INDEXING: WeakKeyDictionary[Client, _Indexing] = WeakKeyDictionary()


def connect_options(credentials: Credentials, namespace: str) -> dict[str, Any]:
    """What ``Client.connect`` is given beside the address: TLS from the PEM files (a client
    certificate: mTLS; no CA: the system's roots; a server name: SNI and the name its
    certificate is checked against), and the API key, which never travels without TLS (the
    SDK sends it as a bearer token)."""
    tls: TLSConfig | bool = bool(credentials.api_key)
    if credentials.tls:
        tls = TLSConfig(
            server_root_ca_cert=credentials.server_ca,
            domain=credentials.server_name,
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
    on_warning: Callable[[str], None] | None = None,
) -> Client:
    """A client of ``connection``'s server (its metrics through ``runtime`` when given);
    :class:`TemporalUnreachable` when its credentials cannot be read, or the server cannot be
    reached or refuses them. ``on_warning`` is given by a client that starts workflows
    (serve's): the namespace's search attributes are looked up (once, here), their absence
    said once to it, and the workflows it starts go without them then. Without it (a worker,
    a stop: they start none) nothing is looked up, and :func:`submit` sets none."""
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
        if "NotValidForName" in str(exc):  # rustls: the certificate names another host
            hint += (
                "; the server's certificate is not issued for the name dialled: give the one "
                "it is issued for (--tls-server-name)"
            )
        where = address_shown(connection.target)
        raise TemporalUnreachable(
            f"cannot reach Temporal at {where} ({connection.describe()}): {exc}{hint}"
        ) from exc
    await _namespace_exists(client, connection)
    if on_warning is not None:
        _INDEXING[client] = await _indexing(client, connection.namespace, on_warning)
    return client


async def _indexing(client: Client, namespace: str, warn: Callable[[str], None]) -> _Indexing:
    """Whether the namespace has every search attribute as a Keyword: all or none are set,
    as the workflow upserts its status only when it started with them."""
    request = ListSearchAttributesRequest(namespace=namespace)
    try:
        listed = await client.operator_service.list_search_attributes(request)
    except RPCError:  # not allowed to look (a narrow key): the first start tells
        return _Indexing(namespace, None, warn)
    keyword = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
    have = listed.custom_attributes
    missing = [key.name for key in KEYS if have.get(key.name) != keyword]
    indexing = _Indexing(namespace, True, warn)
    if missing:
        indexing.drop(missing)
    return indexing


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
    repository: str | None = None,
) -> WorkflowHandle[RunWorkflow, RunOutcome] | None:
    """Start the task's workflow; ``None`` when one is running for it already (never two).
    It carries the search attributes (its task, ``repository``, its status) when the client's
    namespace has them (:func:`connect` looked)."""
    run = RunInput(
        task_id=task_id,
        task_queue=task_queue,
        keep_worktrees=keep_worktrees,
        timeouts=timeouts or Timeouts(),
        # Its repository's workers alone open its runs (none named: any worker).
        open_queue=None if repository is None else repository_queue(task_queue, repository),
    )
    indexing = _INDEXING.get(client)
    indexed = indexing is not None and indexing.usable is not False
    try:
        return await _start(client, run, at_start(task_id, repository) if indexed else None)
    except RPCError as exc:
        # A namespace that would not say whether it has them, and has not.
        if indexing is None or not indexed or not _unregistered(exc):
            raise
        indexing.drop([key.name for key in KEYS])
    return await _start(client, run, None)


async def _start(
    client: Client, run: RunInput, attributes: TypedSearchAttributes | None
) -> WorkflowHandle[RunWorkflow, RunOutcome] | None:
    try:
        return await client.start_workflow(
            RunWorkflow.run,
            run,
            id=workflow_id(run.task_id),
            task_queue=run.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            search_attributes=attributes,
        )
    except WorkflowAlreadyStartedError:
        return None


def _unregistered(exc: RPCError) -> bool:
    """The server's refusal of a search attribute the namespace does not have."""
    return exc.status is RPCStatusCode.INVALID_ARGUMENT and "search attribute" in exc.message


async def running(client: Client, task_id: str) -> bool:
    """Whether the task's workflow is running now."""
    try:
        described = await client.get_workflow_handle(workflow_id(task_id)).describe()
    except RPCError:  # never started
        return False
    return described.status is WorkflowExecutionStatus.RUNNING


async def stop(client: Client, task_id: str, request: StopRequest) -> bool:
    """Signal the task's running workflow to stop its run and hold the task (recorded with
    who asked, when ``request`` says); False when no workflow of the task is running."""
    if not await running(client, task_id):
        return False
    handle = client.get_workflow_handle(workflow_id(task_id))
    try:
        await handle.signal(STOP_SIGNAL, request)
    except RPCError:  # it closed in between
        return False
    return True


async def outcome(client: Client, task_id: str) -> RunOutcome:
    """Wait for the task's latest workflow and return what it came to."""
    handle = client.get_workflow_handle(workflow_id(task_id), result_type=RunOutcome)
    result: RunOutcome = await handle.result()
    return result
