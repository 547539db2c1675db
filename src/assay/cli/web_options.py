"""The dashboard flags of `assay serve` (local and --temporal) and the one way both start it.

Every dashboard needs a credential, on every bind: the tokens of the operator's store
(``assay token``; the first is made, and its login URL printed, when the store has none) and
``--web-token`` / ``ASSAY_WEB_TOKEN`` as one more, named ``web-token``. A token shorter than
16 bytes is refused (exit 2). ``--web-anonymous-read`` opens the pages, never the actions, on
loopback only.

Nothing here imports FastAPI or uvicorn at import time: ``assay --help`` must stay fast.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from assay.cli.workspace import EXIT_USAGE, fail
from assay.web.config import DEFAULT_HOST, DEFAULT_PORT, LOOPBACK_HOSTS, TOKEN_ENV
from assay.web.tokens import MIN_SECRET_BYTES

if TYPE_CHECKING:
    from assay.adapters.store.sql import Ledger
    from assay.engine.operations.stopping import TemporalStop
    from assay.web.server import DashboardServer
    from assay.web.tokens import TokenStore

NoWeb = Annotated[bool, typer.Option("--no-web", help="Serve the queue only, no dashboard.")]
WebOnly = Annotated[
    bool,
    typer.Option(
        "--web-only", help="Serve the dashboard only, no queue work (for a ledger others fill)."
    ),
]
WebHost = Annotated[
    str,
    typer.Option(
        "--web-host",
        metavar="HOST",
        help="The dashboard's address (plain HTTP: off loopback, put TLS in front).",
    ),
]
WebPort = Annotated[
    int,
    typer.Option("--web-port", min=0, max=65535, help="The dashboard's port (0: any free one)."),
]
WebToken = Annotated[
    str | None,
    typer.Option(
        "--web-token",
        envvar=TOKEN_ENV,
        show_envvar=True,
        metavar="TOKEN",
        help="One more dashboard token (at least 16 bytes; recorded as 'web-token'), besides "
        "those of `assay token`. On the command line every local user sees it in `ps`: prefer "
        "the variable, or `assay token add NAME`.",
    ),
]
WebAnonymousRead = Annotated[
    bool,
    typer.Option(
        "--web-anonymous-read",
        help="Let anyone on this machine read the dashboard without a token (loopback only; "
        "actions still need one).",
    ),
]

POLL_SECONDS = 0.2


@dataclass(frozen=True)
class WebOptions:
    enabled: bool = True
    only: bool = False
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None
    anonymous_read: bool = False

    @classmethod
    def of(
        cls,
        *,
        no_web: bool,
        web_only: bool,
        host: str,
        port: int,
        token: str | None,
        anonymous_read: bool = False,
        once: bool = False,
    ) -> WebOptions:
        """The options, or exit 2 with the reason when they cannot be served.

        ``once`` (serve until the queue is idle) serves no dashboard: it would vanish with the
        queue's last run, and batch callers (CI, tests) must not contend for one port."""
        if no_web and web_only:
            fail("--no-web and --web-only: choose one")
        if once and web_only:
            fail("--once and --web-only: the dashboard alone never goes idle; choose one")
        token = token.strip() if token else None
        if token is not None and len(token.encode()) < MIN_SECRET_BYTES:
            fail(
                f"--web-token / {TOKEN_ENV} is too short: a dashboard token needs at least "
                f"{MIN_SECRET_BYTES} bytes (`assay token add NAME` makes a strong one)"
            )
        if anonymous_read and host not in LOOPBACK_HOSTS:
            fail(
                f"--web-anonymous-read is for a loopback dashboard only, not {host} "
                "(bind --web-host 127.0.0.1, or give readers a token)"
            )
        enabled = not no_web and not once
        return cls(
            enabled=enabled,
            only=web_only,
            host=host,
            port=port,
            token=token or None,
            anonymous_read=anonymous_read,
        )


@contextlib.contextmanager
def dashboard(
    options: WebOptions,
    ledger: Ledger,
    state_dir: Path | None,
    *,
    home: Path | None = None,
    temporal_stop: TemporalStop | None = None,
) -> Iterator[DashboardServer | None]:
    """The dashboard served while the block runs (None with --no-web); a taken port is exit 2.
    ``home``: this machine's ``.assay`` (its running runs can be stopped from the dashboard);
    ``temporal_stop``: how a stop reaches a workflow, when the runs are on Temporal."""
    if not options.enabled:
        yield None
        return
    from assay.web.auth import Credentials
    from assay.web.config import WebConfig
    from assay.web.server import DashboardServer, PortTaken
    from assay.web.tokens import TokenError, TokenStore

    store = TokenStore()
    try:
        credentials = Credentials.of(store, options.token)
        needs_first = not credentials.any()
    except TokenError as exc:
        fail(str(exc), EXIT_USAGE)
    config = WebConfig(
        ledger=ledger,
        state_dir=state_dir,
        credentials=credentials,
        anonymous_read=options.anonymous_read,
        host=options.host,
        port=options.port,
        home=home,
        temporal_stop=temporal_stop,
    )
    server = DashboardServer(config)
    try:
        server.start()
    except PortTaken as exc:
        fail(str(exc), EXIT_USAGE)
    try:
        # Made once serving: a refused start leaves the operator's config untouched. The
        # server reads the store afresh, so this token works from its first request.
        made = store.add_first() if needs_first else None
    except TokenError as exc:
        server.stop()
        fail(str(exc), EXIT_USAGE)
    reading = " (reading open on this machine)" if options.anonymous_read else ""
    typer.echo(f"dashboard: {server.url}{reading}", err=True)
    typer.echo(login_line(server.url, made, store), err=True)
    try:
        yield server
    finally:
        server.stop()


def login_line(url: str, made: str | None, store: TokenStore) -> str:
    """How to log in: the URL with the token made just now (shown this once), or where to get
    one."""
    from assay.web.tokens import FIRST_TOKEN_NAME

    if made is not None:
        return (
            f"dashboard login: {url}login?token={made} (token {FIRST_TOKEN_NAME!r}, made now and "
            f"shown only this once; only its hash is kept, in {store.path})"
        )
    return (
        f"dashboard login: {url}login with a dashboard token (`assay token add NAME` prints "
        "a new one)"
    )


def serve_web_only(
    options: WebOptions,
    ledger: Ledger,
    state_dir: Path | None,
    *,
    home: Path | None = None,
    temporal_stop: TemporalStop | None = None,
) -> None:
    """The dashboard alone until SIGINT / SIGTERM (exit 130 / 143, like serve)."""
    from assay.adapters.process import stop_requested
    from assay.cli.signals import graceful_stop, interrupted_exit

    served = dashboard(options, ledger, state_dir, home=home, temporal_stop=temporal_stop)
    with graceful_stop("stopping the dashboard"), served:
        while stop_requested() is None:
            time.sleep(POLL_SECONDS)
    typer.echo("dashboard stopped", err=True)
    stopped = interrupted_exit()
    if stopped is not None:
        raise typer.Exit(stopped)
