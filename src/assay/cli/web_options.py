"""The dashboard flags of `assay serve` (local and --temporal) and the one way both start it.

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

if TYPE_CHECKING:
    from assay.adapters.store.sql import Ledger
    from assay.web.server import DashboardServer

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
        "--web-host", metavar="HOST", help="The dashboard's address; not loopback needs a token."
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
        help="Required on every dashboard request (cookie via /login, or Authorization: Bearer).",
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

    @classmethod
    def of(
        cls,
        *,
        no_web: bool,
        web_only: bool,
        host: str,
        port: int,
        token: str | None,
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
        enabled = not no_web and not once
        options = cls(enabled=enabled, only=web_only, host=host, port=port, token=token or None)
        if options.enabled and options.host not in LOOPBACK_HOSTS and not options.token:
            fail(
                f"the dashboard on {host} (not loopback) needs a token: pass --web-token or set "
                f"{TOKEN_ENV} (or bind --web-host 127.0.0.1, or --no-web)"
            )
        return options


@contextlib.contextmanager
def dashboard(
    options: WebOptions, ledger: Ledger, state_dir: Path | None
) -> Iterator[DashboardServer | None]:
    """The dashboard served while the block runs (None with --no-web); a taken port is exit 2."""
    if not options.enabled:
        yield None
        return
    from assay.web.config import WebConfig
    from assay.web.server import DashboardServer, PortTaken

    config = WebConfig(
        ledger=ledger,
        state_dir=state_dir,
        token=options.token,
        host=options.host,
        port=options.port,
    )
    server = DashboardServer(config)
    try:
        server.start()
    except PortTaken as exc:
        fail(str(exc), EXIT_USAGE)
    guarded = " (token required: open /login)" if options.token else ""
    typer.echo(f"dashboard: {server.url}{guarded}", err=True)
    try:
        yield server
    finally:
        server.stop()


def serve_web_only(options: WebOptions, ledger: Ledger, state_dir: Path | None) -> None:
    """The dashboard alone until SIGINT / SIGTERM (exit 130 / 143, like serve)."""
    from assay.adapters.process import stop_requested
    from assay.cli.signals import graceful_stop, interrupted_exit

    with graceful_stop("stopping the dashboard"), dashboard(options, ledger, state_dir):
        while stop_requested() is None:
            time.sleep(POLL_SECONDS)
    typer.echo("dashboard stopped", err=True)
    stopped = interrupted_exit()
    if stopped is not None:
        raise typer.Exit(stopped)
