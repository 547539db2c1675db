"""``assay worker --temporal HOST:PORT``: a Temporal worker for this machine's repository."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from assay.cli.gc import GcEvery, GcOlderThan
from assay.cli.temporal_options import (
    ApiKeyEnv,
    TlsCa,
    TlsCert,
    TlsKey,
    TlsServerName,
    temporal_connection,
)
from assay.cli.workspace import EXIT_USAGE, Workspace, fail

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable

    from assay.adapters.store.sql import Ledger
    from assay.core.contract import Contract
    from assay.core.tasks import Task
    from assay.engine.temporal.activities import Activities

POSTGRES_NEEDED = (
    "--temporal needs the ledger on PostgreSQL: set ASSAY_DATABASE_URL="
    "postgresql+psycopg://USER@HOST:PORT/DB (every worker and serve share that one ledger)"
)


def temporal_ledger(workspace: Workspace) -> Ledger:
    """The ledger every worker shares: PostgreSQL, or a clear refusal (exit 2)."""
    from assay.adapters.store.names import DATABASE_URL_ENV

    url = os.environ.get(DATABASE_URL_ENV, "")
    if not url.startswith("postgresql"):
        fail(POSTGRES_NEEDED, EXIT_USAGE)
    return workspace.ledger()


def worker(
    temporal: Annotated[
        str,
        typer.Option(
            "--temporal",
            metavar="HOST:PORT",
            envvar="TEMPORAL_ADDRESS",
            help="The Temporal server (default: $TEMPORAL_ADDRESS).",
        ),
    ],
    task_queue: Annotated[
        str, typer.Option("--task-queue", help="The shared task queue serve submits to.")
    ] = "assay",
    namespace: Annotated[
        str,
        typer.Option(
            envvar=["ASSAY_TEMPORAL_NAMESPACE", "TEMPORAL_NAMESPACE"],
            help="The Temporal namespace.",
        ),
    ] = "default",
    max_dispatches: Annotated[
        int,
        typer.Option(
            "--max-dispatches", min=1, max=256, help="Coders at once here (and runs held)."
        ),
    ] = 4,
    repo: Annotated[
        Path | None,
        typer.Option(help="The repository this worker serves (default: the one around here)."),
    ] = None,
    home: Annotated[
        Path | None,
        typer.Option(help="Its .assay folder: seats, runs, halt state (default: ASSAY_HOME)."),
    ] = None,
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
    tls_ca: TlsCa = None,
    tls_server_name: TlsServerName = None,
    api_key_env: ApiKeyEnv = None,
    gc_every: GcEvery = "1h",
    gc_older_than: GcOlderThan = "7d",
    drain_timeout: Annotated[
        str,
        typer.Option(
            "--drain-timeout",
            metavar="DURATION",
            help="On SIGTERM, how long the runs held here may go on to their end (30s, 5m); "
            "0: hand them over at once.",
        ),
    ] = "60s",
    metrics: Annotated[
        str | None,
        typer.Option(
            "--metrics",
            metavar="HOST:PORT",
            envvar="ASSAY_TEMPORAL_METRICS",
            help="Serve the SDK's metrics for Prometheus at http://HOST:PORT/metrics.",
        ),
    ] = None,
    origin: Annotated[
        str,
        typer.Option(
            "--origin",
            metavar="REMOTE",
            envvar="ASSAY_ORIGIN",
            help="The remote every machine shares: runs start from its tip of the task's "
            "branch and land there (auto: the remote 'origin' if there is one; none: land in "
            "this clone).",
        ),
    ] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Say it in JSON lines.")] = False,
) -> None:
    """Serve runs from Temporal: open runs from the shared queue, hold their seats here.

    The ledger is ASSAY_DATABASE_URL (PostgreSQL). A run this worker opens stays here: every
    later activity of it comes to this worker's own queue.

    SIGTERM drains: no new run opens here (another worker opens it), the runs held here go on
    to their end within --drain-timeout (60s), then what is left is stopped and starts again
    on another worker; exit 143. SIGINT, or a second SIGTERM, stops at once: the runs in
    progress here are closed as interrupted and start again on another worker.

    A Temporal reachable beyond loopback must be locked down: a client certificate (mTLS:
    --tls-cert, --tls-key, --tls-ca) or an API key (--api-key-env NAME reads it from $NAME;
    never a flag's value); --tls-server-name when the certificate names another host than
    HOST. Each flag defaults to its variable (ASSAY_TEMPORAL_TLS_CERT, _TLS_KEY, _TLS_CA,
    _TLS_SERVER_NAME, _API_KEY_ENV), else to Temporal's own (TEMPORAL_ADDRESS,
    TEMPORAL_NAMESPACE, TEMPORAL_TLS_CLIENT_CERT_PATH, _CLIENT_KEY_PATH, _SERVER_CA_CERT_PATH,
    _SERVER_NAME, TEMPORAL_TLS=true, TEMPORAL_API_KEY). With neither TLS nor a key, a
    non-loopback address is warned about.
    Exit 2: a certificate without its key (or the reverse), an unreadable or non-PEM file, an
    API key variable unset, empty or under 16 bytes, a server that cannot be reached or
    refuses the credentials, or a namespace it does not have. What its closed runs left here
    (seats, run folders) is collected once it is ready and every --gc-every, as `assay serve`
    does (see `assay gc`). Once it serves, every line on stderr (its log) starts with the
    UTC time; the ready line carries it too. --metrics serves the Temporal SDK's metrics
    (task latencies, polls, slots, RPCs) for Prometheus.

    Upgrades: the ready line names the worker's build id, a hash of the code its workflows
    replay (the workflow, the run graph, the core they decide with), computed at start;
    Temporal records it with each workflow task (the UI, `temporal workflow describe`), so
    which code ran a run, and which workers run which code mid-upgrade, can be told. Workers of
    two build ids may serve one queue while they roll out: a change the workflows in flight
    could not replay goes behind a patch, so any worker takes any workflow (no versioning
    rules are set on the queue).

    With an origin (by default the remote 'origin', when the clone has one), this clone is
    only a workspace: each run fetches the branch its task targets from the origin and starts
    from that tip; `land: merge` pushes the squashed, validated commit only if the origin's
    branch still points where it was validated (else it fetches, combines, validates again:
    8 tries), `land: branch` and a branch left for review are pushed there too. This clone's
    own branches and checkout are never touched. An origin that cannot be fetched leaves the
    task queued for a later try; a push that fails on the network fails the run, refunded.
    """
    import asyncio

    from assay.cli.extras import require

    require("temporalio", "assay worker")  # before anything is created or imported
    from assay.adapters.process import stop_requested
    from assay.cli.gc import collect_between, gc_durations
    from assay.cli.signals import exit_code_for_signal, graceful_stop, interrupted_exit
    from assay.cli.timestamped import stamp_stderr, utc_stamp
    from assay.engine.temporal.build import build_id
    from assay.engine.temporal.client import TemporalUnreachable, connect, metrics_runtime
    from assay.engine.temporal.config import own_queue, repository_queue
    from assay.engine.temporal.worker import run_worker
    from assay.engine.worker import Cadence

    every, retention = gc_durations(gc_every, gc_older_than)
    drain = Drain(_drain_seconds(drain_timeout))
    connection = temporal_connection(
        temporal,
        namespace,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_ca=tls_ca,
        api_key_env=api_key_env,
        tls_server_name=tls_server_name,
    )
    if home is not None:
        os.environ["ASSAY_HOME"] = str(home.absolute())
    # What the flags chose, where the run's secret checks look: no coder is handed the key.
    os.environ.update(connection.environment())
    workspace = Workspace.find(repo, require_commit=True)
    remote = _origin(workspace, origin)
    ledger = temporal_ledger(workspace)
    activities = _activities(workspace, ledger, own_queue(task_queue), max_dispatches, remote)
    activities.stopping = lambda: stop_requested() is not None or drain.signum is not None
    said: set[str] = set()  # leftovers gc could not remove: told once
    build = build_id()  # once: the code this process replays, whatever changes on disk later

    def tidy() -> None:  # its seats, run folders, branches: no one else collects them
        collect_between(workspace, ledger, retention, lambda line: typer.echo(line, err=True), said)

    # Where its repository's tasks open (the shared queue's opens: the tasks of none).
    opens = repository_queue(task_queue, activities.repository)

    def ready() -> None:
        if as_json:
            line = {
                "event": "ready",
                "at": utc_stamp(),
                "task_queue": task_queue,
                "worker_queue": activities.queue,
                "build_id": build,
                "origin": remote,
                "repository": activities.repository,
                "open_queue": opens,
            }
            typer.echo(json.dumps(line))
        else:
            lands = f"lands on {remote}" if remote else "lands in this clone"
            queues = f"{task_queue} {opens} {activities.queue}"
            typer.echo(f"{utc_stamp()} worker ready: {queues} ({lands}; build {build})")

    async def main() -> None:
        try:
            runtime = metrics_runtime(metrics) if metrics else None
            client = await connect(connection, runtime=runtime)
        except TemporalUnreachable as exc:
            fail(str(exc), EXIT_USAGE)
        stamp_stderr()  # serving from here: its log, each line with its time
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        watcher = loop.create_task(watch_drain(drain, lambda: activities.busy, stop))
        try:
            await run_worker(
                client,
                task_queue=task_queue,
                activities=activities,
                max_runs=max_dispatches,
                stop=stop,
                ready=ready,
                every=[Cadence(tidy, every)],
                build_id=build,
            )
        finally:
            watcher.cancel()

    with graceful_stop(drain=drain), contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    stopped = interrupted_exit()
    if stopped is None and drain.signum is not None:
        stopped = exit_code_for_signal(drain.signum)
    if stopped is not None:
        raise typer.Exit(stopped)


async def watch_drain(
    drain: Drain, busy: Callable[[], bool], stop: asyncio.Event, tick: float = 0.2
) -> None:
    """Set ``stop`` (the worker stops polling) when it should. A stop (SIGINT, a second
    SIGTERM): now. A drain (SIGTERM): no new run opens here; while ``busy`` (runs held, or an
    open in flight that may hold one), they go on to their end within the drain's time, then
    what is left is stopped and handed over, as a stop does."""
    import asyncio

    from assay.adapters.process import request_stop
    from assay.cli.signals import interrupted_exit

    loop = asyncio.get_running_loop()
    while interrupted_exit() is None and drain.signum is None:
        await asyncio.sleep(tick)
    deadline = loop.time() + drain.seconds
    while busy() and interrupted_exit() is None and loop.time() < deadline:
        await asyncio.sleep(tick)
    if busy() and drain.signum is not None and interrupted_exit() is None:
        request_stop(drain.signum)  # its time is up: the coders stop, the runs go
    stop.set()


class Drain:
    """A SIGTERM taken as a drain (the first, when the drain has time at all)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.signum: int | None = None

    def __call__(self, signum: int) -> str | None:
        """What to say when this SIGTERM drains; None: stop now (no drain asked for, or a
        second SIGTERM)."""
        if self.seconds <= 0 or self.signum is not None:
            return None
        self.signum = signum
        return f"draining: no new run here; the runs held end within {self.seconds:g} s"


def _drain_seconds(text: str) -> float:
    from assay.core.gc import DurationError, parse_duration

    try:
        return float(parse_duration(text))
    except DurationError as exc:
        fail(f"--drain-timeout: {exc}")


def _origin(workspace: Workspace, asked: str) -> str | None:
    """The remote runs here start from and land on (exit 2 for one the clone lacks)."""
    from assay.adapters.origin import OriginError, resolve

    try:
        return resolve(workspace.repo, asked)
    except OriginError as exc:
        fail(f"--origin: {exc}", EXIT_USAGE)


def _activities(
    workspace: Workspace,
    ledger: Ledger,
    queue: str,
    max_dispatches: int,
    origin: str | None = None,
) -> Activities:
    from assay.adapters.repo_identity import repository_id
    from assay.adapters.store.contracts import load_task_contract
    from assay.engine.local.executor import LocalEffects
    from assay.engine.temporal.activities import Activities

    def effects_for(task: Task, contract: Contract) -> LocalEffects:
        return LocalEffects(
            repo=workspace.repo,
            home=workspace.home,
            ledger=ledger,
            task=task,
            contract=contract,
            operator_env=os.environ,
            origin=origin,
        )

    return Activities(
        queue=queue,
        repo=workspace.repo,
        home=workspace.home,
        ledger=ledger,
        effects_for=effects_for,
        # The ledger's copy (a worker on another machine has no task files of its own).
        contract_for=lambda task_id: load_task_contract(ledger, task_id, home=workspace.home),
        max_dispatches=max_dispatches,
        # Its runs are this repository's tasks' (and those of none): never another's.
        repository=repository_id(workspace.repo),
    )
