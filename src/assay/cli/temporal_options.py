"""The Temporal credential flags of `assay worker` and `assay serve --temporal`, and the one
way every command that talks to Temporal settles its connection (flags, else environment).

Bad settings are refused before anything starts, exit 2, in one line that never holds the
API key; a Temporal beyond loopback reached with no credential at all is warned about.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from assay.adapters.temporal_connection import (
    API_KEY_ENV_ENV,
    TLS_CA_ENV,
    TLS_CERT_ENV,
    TLS_KEY_ENV,
    TLS_SERVER_NAME_ENV,
)
from assay.cli.workspace import EXIT_USAGE, fail

if TYPE_CHECKING:
    from assay.adapters.temporal_connection import TemporalConnection

TlsCert = Annotated[
    Path | None,
    typer.Option(
        "--tls-cert",
        metavar="PEM",
        help=f"Client certificate for mTLS, with --tls-key (default: ${TLS_CERT_ENV}).",
    ),
]
TlsKey = Annotated[
    Path | None,
    typer.Option(
        "--tls-key",
        metavar="PEM",
        help=f"The client certificate's private key (default: ${TLS_KEY_ENV}).",
    ),
]
TlsCa = Annotated[
    Path | None,
    typer.Option(
        "--tls-ca",
        metavar="PEM",
        help=(
            "CA certificate(s) the server's certificate is checked against; turns TLS on "
            f"(default: ${TLS_CA_ENV}; with only --tls-cert: the system's roots)."
        ),
    ),
]
TlsServerName = Annotated[
    str | None,
    typer.Option(
        "--tls-server-name",
        metavar="NAME",
        help=(
            "The name the server's certificate is checked against and sent as SNI, when it "
            "is not HOST (a load balancer's address, an IP); turns TLS on "
            f"(default: ${TLS_SERVER_NAME_ENV})."
        ),
    ),
]
ApiKeyEnv = Annotated[
    str | None,
    typer.Option(
        "--api-key-env",
        metavar="NAME",
        help=(
            "The variable that holds the Temporal API key (16 bytes or more), sent over TLS; "
            f"never the key itself (default: ${API_KEY_ENV_ENV})."
        ),
    ),
]


def temporal_connection(
    target: str,
    namespace: str,
    *,
    tls_cert: Path | None = None,
    tls_key: Path | None = None,
    tls_ca: Path | None = None,
    api_key_env: str | None = None,
    tls_server_name: str | None = None,
    warn: bool = True,
) -> TemporalConnection:
    """The connection the flags and environment describe, its files and key checked now
    (exit 2 with the reason); ``warn``: say so on stderr when it has no credential at all
    and the address is not loopback."""
    from assay.adapters.temporal_connection import ConnectionSettingsError, TemporalConnection

    try:
        connection = TemporalConnection.settle(
            target,
            namespace,
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_ca=tls_ca,
            api_key_env=api_key_env,
            tls_server_name=tls_server_name,
        )
        connection.credentials()
    except ConnectionSettingsError as exc:
        fail(str(exc), EXIT_USAGE)
    warning = connection.insecure_warning() if warn else None
    if warning is not None:
        typer.echo(f"assay: WARNING: {warning}", err=True)
    return connection
