"""``assay serve``: work the queue with N concurrent runs until stopped (or until idle).

The queue worker is :class:`assay.engine.worker.QueueWorker`; this module only wires it to
this repository (its step runs a task here) and prints what it says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from assay.cli.gc import GcEvery, GcOlderThan
from assay.cli.output_options import EventsFlag, EventsFormat, ProgressFlag, ProgressMode
from assay.cli.signals import graceful_stop, interrupted_exit
from assay.cli.temporal_options import ApiKeyEnv, TlsCa, TlsCert, TlsKey, TlsServerName
from assay.cli.web_options import (
    NoWeb,
    WebAnonymousRead,
    WebHost,
    WebOnly,
    WebOptions,
    WebPort,
    WebToken,
    dashboard,
    serve_web_only,
)
from assay.cli.workspace import (
    Workspace,
    fail,
    print_json,
    refuse_secret_env,
    refuse_unconfinable,
)
from assay.web.config import DEFAULT_HOST, DEFAULT_PORT

if TYPE_CHECKING:
    from assay.adapters.store.sql import Ledger
    from assay.adapters.temporal_connection import TemporalConnection
    from assay.cli.event_stream import EventStream
    from assay.cli.serve_news import ServeSummary
    from assay.core.tasks import Task
    from assay.engine.effects import RunEvent
    from assay.engine.local.runner import RunReport


def serve(
    concurrency: Annotated[int, typer.Option(min=1, max=64, help="Runs at once.")] = 1,
    once: Annotated[
        bool, typer.Option("--once", help="Exit when nothing is runnable instead of waiting.")
    ] = False,
    poll: Annotated[float, typer.Option(min=0.1, help="Seconds between queue checks.")] = 2.0,
    gc_every: GcEvery = "1h",
    gc_older_than: GcOlderThan = "7d",
    temporal: Annotated[
        str | None,
        typer.Option(
            "--temporal",
            metavar="HOST:PORT",
            help="Submit runs as Temporal workflows (workers run them; ledger on PostgreSQL).",
        ),
    ] = None,
    task_queue: Annotated[
        str, typer.Option("--task-queue", help="With --temporal: the workers' shared queue.")
    ] = "assay",
    namespace: Annotated[
        str,
        typer.Option(
            envvar=["ASSAY_TEMPORAL_NAMESPACE", "TEMPORAL_NAMESPACE"],
            help="With --temporal: the Temporal namespace.",
        ),
    ] = "default",
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
    tls_ca: TlsCa = None,
    tls_server_name: TlsServerName = None,
    api_key_env: ApiKeyEnv = None,
    no_web: NoWeb = False,
    web_only: WebOnly = False,
    web_host: WebHost = DEFAULT_HOST,
    web_port: WebPort = DEFAULT_PORT,
    web_token: WebToken = None,
    web_anonymous_read: WebAnonymousRead = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="When serve stops, print what it did as JSON.")
    ] = False,
    events: EventsFlag = None,
    progress: ProgressFlag = ProgressMode.AUTO,
) -> None:
    """Run queued (and failed, runnable) tasks, N at a time; interrupted runs are closed first.

    Each task runs until settle makes it done, held, or failed; a failed task is picked up
    again until max_attempts hold it for a human. A task this machine cannot run as set (a
    coder's or judge's program or API key missing here) is held with the reason, never run.
    A task that waits for its provider quota is skipped until its time (said once per wait);
    with --once, it does not keep serve running.
    SIGINT / SIGTERM stop the coders, close the runs in progress as interrupted (their tasks
    run again at the next serve), and exit 130 / 143. What closed runs left behind is
    collected at start and every --gc-every (see `assay gc`).

    The dashboard (see `--web-*`) is served beside the queue, on http://127.0.0.1:8765/ by
    default, and stops with it; --web-only serves it alone, --no-web (and --once) not at all.
    It needs a token on every address, loopback included: the first start makes one and
    prints its login URL once; `assay token add NAME` makes more (the ledger records the
    token's name as who acted). --web-anonymous-read lets this machine read without one.

    --events jsonl writes every event of the ledger to stdout as it is written, one JSON
    object a line; --json prints the summary (runs, closed, interrupted, skipped, recovered,
    stopped_by) when serve stops, as the last line with --events.

    --temporal: the workers run the tasks; serve only submits them, so it runs anywhere the
    ledger (ASSAY_DATABASE_URL) and Temporal are reachable, inside a repository or not.
    A Temporal reachable beyond loopback must be locked down: a client
    certificate (mTLS: --tls-cert, --tls-key, --tls-ca) or an API key (--api-key-env NAME
    reads it from $NAME; never a flag's value); --tls-server-name when the certificate
    names another host than HOST. Each flag defaults to its variable (ASSAY_TEMPORAL_TLS_CERT,
    _TLS_KEY, _TLS_CA, _TLS_SERVER_NAME, _API_KEY_ENV), else to Temporal's own
    (TEMPORAL_NAMESPACE, TEMPORAL_TLS_CLIENT_CERT_PATH, _CLIENT_KEY_PATH, _SERVER_CA_CERT_PATH,
    _SERVER_NAME, TEMPORAL_TLS=true, TEMPORAL_API_KEY). With neither, a non-loopback address
    is warned about. Exit 2: a certificate without its key (or the reverse), an
    unreadable or non-PEM file, an API key variable unset, empty or under 16 bytes, or a
    server that cannot be reached or refuses the credentials.
    """
    web = WebOptions.of(
        no_web=no_web,
        web_only=web_only,
        host=web_host,
        port=web_port,
        token=web_token,
        anonymous_read=web_anonymous_read,
        once=once,
    )
    if web.only and (events is not None or json_output):
        fail("--web-only works no queue: --events and --json need the queue worker")
    credentials = (tls_cert, tls_key, tls_ca, tls_server_name, api_key_env)
    if temporal is None and any(c is not None for c in credentials):
        fail(
            "--tls-cert, --tls-key, --tls-ca, --tls-server-name and --api-key-env go with "
            "--temporal"
        )
    if temporal is not None:
        from assay.cli.extras import require
        from assay.cli.temporal_options import temporal_connection

        require("temporalio", "assay serve --temporal")

        connection = temporal_connection(
            temporal,
            namespace,
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_ca=tls_ca,
            api_key_env=api_key_env,
            tls_server_name=tls_server_name,
            warn=not web.only,
        )
        _serve_temporal(
            connection=connection,
            task_queue=task_queue,
            once=once,
            poll=poll,
            web=web,
            events=events,
            json_output=json_output,
        )
        return
    if web.only:
        workspace = Workspace.find()
        home = workspace.home
        serve_web_only(web, workspace.ledger(), home / "halt-state", home=home)
        return
    from datetime import UTC, datetime

    from assay.cli.gc import collect_between, gc_durations
    from assay.cli.progress_choice import progress_for
    from assay.cli.serve_news import ServeSummary, news
    from assay.engine.admission import admit
    from assay.engine.local.runner import recover_interrupted, run_task
    from assay.engine.worker import Cadence, QueueWorker

    every, retention = gc_durations(gc_every, gc_older_than)
    workspace = Workspace.find()
    ledger = workspace.ledger()
    from assay.adapters.repo_identity import repository_id

    repository = repository_id(workspace.repo)  # it runs this repository's tasks only
    stream = _event_stream(ledger, events, None)
    many = concurrency > 1
    display = progress_for(
        progress, many=many, idle="waiting for work", streaming=stream is not None
    )
    summary = ServeSummary()

    def run_here(task: Task) -> RunReport:
        contract = workspace.load_contract(task.id)
        refuse_unconfinable(contract)  # exit 2 (re-raised by the worker), the task untouched
        refuse_secret_env(contract)
        # A program or key this machine lacks: the task is held (Unrunnable), never started.
        admit(
            ledger=ledger,
            task=task,
            contract=contract,
            repo=workspace.repo,
            home=workspace.home,
            now=datetime.now(UTC),
        )
        shown = display.view(task.id) if many else display

        def sink(event: RunEvent) -> None:
            shown(event)
            if stream is not None:
                stream.pump_quietly()  # journaled already: its line leaves now

        try:
            return run_task(
                repo=workspace.repo,
                home=workspace.home,
                ledger=ledger,
                task=task,
                contract=contract,
                sink=sink,
            )
        finally:
            display.ended(task.id if many else None)

    said: set[str] = set()  # the leftovers gc could not remove: told once, not at every gc

    def recover() -> list[str]:
        return recover_interrupted(
            repo=workspace.repo,
            home=workspace.home,
            ledger=ledger,
            contract_for=workspace.load_contract,
            warn=lambda line: display.say(f"assay: warning: {line}"),
        )

    worker = QueueWorker(
        ledger,
        run_here,
        concurrency=concurrency,
        once=once,
        poll=poll,
        recover=recover,
        every=[
            Cadence(lambda: collect_between(workspace, ledger, retention, display.say, said), every)
        ],
        events=news(display, summary),
        repository=repository,
    )
    with (
        graceful_stop(notice=display.notice),
        dashboard(web, ledger, workspace.home / "halt-state", home=workspace.home),
        display,
    ):
        if stream is None:
            closed = worker.run()
        else:
            with stream.following():
                closed = worker.run()
    summary.runs = closed.runs
    stopped_runs = f" ({closed.interrupted} interrupted)" if closed.interrupted else ""
    typer.echo(f"served {closed.runs} run(s){stopped_runs}", err=True)
    _finish(summary, json_output, compact=stream is not None)


def _serve_temporal(
    *,
    connection: TemporalConnection,
    task_queue: str,
    once: bool,
    poll: float,
    web: WebOptions,
    events: EventsFormat | None,
    json_output: bool,
) -> None:
    """``serve --temporal``: the workers run the tasks, so ``--events`` and the summary
    follow the shared ledger (what each run's close recorded) while the workflows go on."""
    from assay.cli.serve_news import ServeSummary
    from assay.cli.serve_temporal import serve_temporal

    def serving() -> None:
        serve_temporal(
            connection=connection,
            task_queue=task_queue,
            once=once,
            poll=poll,
            web=web,
        )

    if events is None and not json_output:
        serving()
        return
    from assay.cli.worker import temporal_ledger

    summary = ServeSummary()
    stream = _event_stream(temporal_ledger(Workspace.shared()), events, summary)
    assert stream is not None  # a summary always follows the ledger
    try:
        with stream.following():
            serving()
    except typer.Exit as leaving:
        if leaving.exit_code not in (0, None) and interrupted_exit() is None:
            raise  # a refusal (exit 2), not an end of serving: it printed why
        _finish(summary, json_output, compact=events is not None)
        raise
    _finish(summary, json_output, compact=events is not None)


def _event_stream(
    ledger: Ledger, events: EventsFormat | None, summary: ServeSummary | None
) -> EventStream | None:
    """Every event written to the ledger from now on (serve works the whole queue): on
    stdout with ``--events``, and counted into ``summary`` when one is given."""
    if events is None and summary is None:
        return None
    from assay.adapters.store.records import Event
    from assay.cli.event_stream import EventStream, newest_event_id

    def wants(event: Event) -> bool:
        if summary is not None:
            summary.seen(event)
        return events is not None

    return EventStream(ledger, after=newest_event_id(ledger), wants=wants)


def _finish(summary: ServeSummary, json_output: bool, *, compact: bool) -> None:
    """The summary (with ``--json``), then the exit a stop signal asks for."""
    import json
    import sys

    from assay.adapters.process import stop_requested

    summary.stopped(stop_requested())
    if json_output:
        if compact:  # the last line of the event stream
            sys.stdout.write(json.dumps(summary.document(), separators=(",", ":")) + "\n")
            sys.stdout.flush()
        else:
            print_json(summary.document())
    stopped = interrupted_exit()
    if stopped is not None:
        raise typer.Exit(stopped)
