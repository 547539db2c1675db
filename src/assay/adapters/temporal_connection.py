"""How assay reaches a Temporal server: its address, namespace and the credentials that lock it.

Whoever can talk to the Temporal server can change any task (a ``stop`` signal holds it), so a
deployment reachable beyond loopback wants TLS with a client certificate (mTLS) or an API key.
The settings come from a command's flags, else from the environment, so the commands without
such flags (``assay task hold`` reaching a running workflow) use the same ones:
``ASSAY_TEMPORAL_TLS_CERT`` / ``_TLS_KEY`` / ``_TLS_CA`` name PEM files,
``ASSAY_TEMPORAL_TLS_SERVER_NAME`` the name the server's certificate is checked against (and
sent as SNI) when it is not the address's host, and ``ASSAY_TEMPORAL_API_KEY_ENV`` names the
variable that holds the API key. The key itself is
never a flag's value, and never printed. No Temporal import here: the engine maps these onto
the SDK's ``TLSConfig``.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

TLS_CERT_ENV = "ASSAY_TEMPORAL_TLS_CERT"
TLS_KEY_ENV = "ASSAY_TEMPORAL_TLS_KEY"
TLS_CA_ENV = "ASSAY_TEMPORAL_TLS_CA"
TLS_SERVER_NAME_ENV = "ASSAY_TEMPORAL_TLS_SERVER_NAME"
API_KEY_ENV_ENV = "ASSAY_TEMPORAL_API_KEY_ENV"
CODEC_KEY_ENV = "ASSAY_TEMPORAL_CODEC_KEY"  # seals workflow histories (its value, a secret)
# Temporal's own environment configuration (as its CLI and SDKs read it): the last fallback of
# each setting, after the flag and assay's own variable.
STANDARD = {
    TLS_CERT_ENV: "TEMPORAL_TLS_CLIENT_CERT_PATH",
    TLS_KEY_ENV: "TEMPORAL_TLS_CLIENT_KEY_PATH",
    TLS_CA_ENV: "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
    TLS_SERVER_NAME_ENV: "TEMPORAL_TLS_SERVER_NAME",
}
STANDARD_API_KEY = "TEMPORAL_API_KEY"  # the key's value: assay names this variable
STANDARD_TLS = "TEMPORAL_TLS"  # true: TLS on, the system's roots
MIN_CODEC_KEY = 32
MIN_API_KEY_BYTES = 16

_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A DNS name or an IP address: what SNI and a certificate's subjectAltName can carry.
_SERVER_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,253}")
_CERTIFICATE = b"-----BEGIN CERTIFICATE-----"
_PRIVATE_KEY = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----")


class ConnectionSettingsError(ValueError):
    """The Temporal credentials asked for cannot be used (said in one sentence)."""


@dataclass(frozen=True)
class Credentials:
    """What the files and the key variable hold, read and checked; never shown in a repr."""

    client_cert: bytes | None = None
    client_key: bytes | None = field(default=None, repr=False)
    server_ca: bytes | None = None
    api_key: str | None = field(default=None, repr=False)
    codec_key: str | None = field(default=None, repr=False)
    server_name: str | None = None

    @property
    def tls(self) -> bool:
        return any(
            item is not None for item in (self.client_cert, self.server_ca, self.server_name)
        )


@dataclass(frozen=True)
class TemporalConnection:
    """Where Temporal is and how assay proves itself to it (paths and a variable's name)."""

    target: str
    namespace: str
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_ca: Path | None = None
    api_key_env: str | None = None
    tls_server_name: str | None = None

    @classmethod
    def settle(
        cls,
        target: str,
        namespace: str,
        *,
        tls_cert: Path | None = None,
        tls_key: Path | None = None,
        tls_ca: Path | None = None,
        api_key_env: str | None = None,
        tls_server_name: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> TemporalConnection:
        """Each setting from its flag, else its environment variable; the pairs checked
        (a certificate needs its key). Files are read by :meth:`credentials`."""
        env = os.environ if environ is None else environ

        def setting(name: str) -> str:
            return env.get(name, "").strip() or env.get(STANDARD.get(name, ""), "").strip()

        def path(given: Path | None, name: str) -> Path | None:
            text = setting(name)
            return given if given is not None else Path(text) if text else None

        named = api_key_env if api_key_env is not None else env.get(API_KEY_ENV_ENV, "")
        if not named.strip() and env.get(STANDARD_API_KEY, "").strip():
            named = STANDARD_API_KEY
        key_env = named.strip() or None
        if key_env is not None and not _VARIABLE_NAME.fullmatch(key_env):
            # Never echoed: a key given here by mistake must not reach a terminal or a log.
            raise ConnectionSettingsError(
                f"--api-key-env (or ${API_KEY_ENV_ENV}) takes the name of the variable that "
                "holds the API key (such as TEMPORAL_API_KEY), not the key itself"
            )
        given = tls_server_name if tls_server_name is not None else setting(TLS_SERVER_NAME_ENV)
        server_name = (given or "").strip() or None
        if server_name is None and _true(env.get(STANDARD_TLS, "")):
            server_name = _host_of(target)  # TLS on, checked against the address's own host
        if server_name is not None and not _SERVER_NAME.fullmatch(server_name):
            raise ConnectionSettingsError(
                f"--tls-server-name (or ${TLS_SERVER_NAME_ENV}) {server_name!r} is no host "
                "name: the DNS name (or IP address) the server's certificate is issued for"
            )
        made = cls(
            target=target,
            namespace=namespace,
            tls_cert=path(tls_cert, TLS_CERT_ENV),
            tls_key=path(tls_key, TLS_KEY_ENV),
            tls_ca=path(tls_ca, TLS_CA_ENV),
            api_key_env=key_env,
            tls_server_name=server_name,
        )
        if made.tls_cert is not None and made.tls_key is None:
            raise ConnectionSettingsError(
                f"--tls-cert (or ${TLS_CERT_ENV}) needs --tls-key (or ${TLS_KEY_ENV}): "
                "the client certificate's private key"
            )
        if made.tls_key is not None and made.tls_cert is None:
            raise ConnectionSettingsError(
                f"--tls-key (or ${TLS_KEY_ENV}) needs --tls-cert (or ${TLS_CERT_ENV}): "
                "the client certificate the key belongs to"
            )
        return made

    @property
    def secured(self) -> bool:
        """TLS or an API key (an API key always travels over TLS)."""
        settings = (self.tls_cert, self.tls_ca, self.api_key_env, self.tls_server_name)
        return any(s is not None for s in settings)

    def describe(self) -> str:
        """How it connects, for a line a human reads (names only, never a secret)."""
        ways = []
        if self.tls_cert is not None:
            ways.append("mTLS")
        elif self.secured:
            ways.append("TLS")
        if self.tls_server_name is not None:
            ways[-1] += f" as {self.tls_server_name}"
        if self.api_key_env is not None:
            ways.append(f"API key ${self.api_key_env}")
        return " + ".join(ways) or "no TLS, no API key"

    def environment(self) -> dict[str, str]:
        """These settings as the variables they default to (absolute paths), for a process
        that must know them after its flags are gone."""
        named = {
            TLS_CERT_ENV: self.tls_cert,
            TLS_KEY_ENV: self.tls_key,
            TLS_CA_ENV: self.tls_ca,
        }
        env = {name: str(path.absolute()) for name, path in named.items() if path is not None}
        if self.api_key_env is not None:
            env[API_KEY_ENV_ENV] = self.api_key_env
        if self.tls_server_name is not None:
            env[TLS_SERVER_NAME_ENV] = self.tls_server_name
        return env

    def credentials(self, environ: Mapping[str, str] | None = None) -> Credentials:
        """The files' contents and the key, checked; :class:`ConnectionSettingsError` says
        what is wrong with them."""
        env = os.environ if environ is None else environ
        api_key = None
        if self.api_key_env is not None:
            api_key = _api_key(self.api_key_env, env)
        cert = _pem(self.tls_cert, "client certificate", "--tls-cert")
        key = _pem(self.tls_key, "client private key", "--tls-key")
        ca = _pem(self.tls_ca, "CA certificate", "--tls-ca")
        codec_key = env.get(CODEC_KEY_ENV, "").strip() or None
        if codec_key is not None and len(codec_key) < MIN_CODEC_KEY:
            raise ConnectionSettingsError(
                f"${CODEC_KEY_ENV} holds {len(codec_key)} characters: a key that seals the "
                f"workflow histories needs at least {MIN_CODEC_KEY} (e.g. `openssl rand -hex 32`)"
            )
        return Credentials(
            client_cert=cert,
            client_key=key,
            server_ca=ca,
            api_key=api_key,
            codec_key=codec_key,
            server_name=self.tls_server_name,
        )

    def insecure_warning(self) -> str | None:
        """The warning a worker or serve gives when it reaches a Temporal beyond loopback with
        no credential at all; None on loopback or with TLS or a key."""
        if self.secured or is_loopback(self.target):
            return None
        return (
            f"Temporal at {self.target} is reached with no TLS and no API key: anyone who "
            "reaches that address can signal, cancel and start the runs' workflows (hold or "
            "run any task); lock it down (mTLS or an API key) and pass --tls-cert/--tls-key/"
            "--tls-ca or --api-key-env"
        )


def _true(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


def _host_of(target: str) -> str | None:
    host = urlsplit(f"//{target}").hostname
    return host or None


def is_loopback(target: str) -> bool:
    """Whether ``HOST:PORT`` names this machine's loopback (127.0.0.0/8, [::1], localhost)."""
    try:
        host = urlsplit(f"//{target}").hostname or ""
    except ValueError:  # not HOST:PORT at all: not known to be loopback
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _api_key(name: str, env: Mapping[str, str]) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ConnectionSettingsError(
            f"the Temporal API key variable ${name} is not set or empty "
            f"(--api-key-env / ${API_KEY_ENV_ENV} names it)"
        )
    if not value.isascii() or not value.isprintable():
        raise ConnectionSettingsError(
            f"the Temporal API key in ${name} holds characters a request header cannot carry "
            "(only printable ASCII)"
        )
    size = len(value.encode())
    if size < MIN_API_KEY_BYTES:
        raise ConnectionSettingsError(
            f"the Temporal API key in ${name} is {size} bytes long; a key shorter than "
            f"{MIN_API_KEY_BYTES} bytes is refused"
        )
    return value


def _pem(path: Path | None, what: str, flag: str) -> bytes | None:
    if path is None:
        return None
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConnectionSettingsError(
            f"cannot read the Temporal {what} {path} ({flag}): {exc.strerror or exc}"
        ) from None
    wanted = _PRIVATE_KEY.search(data) if "key" in what else _CERTIFICATE in data
    if not wanted:
        kind = "private key" if "key" in what else "certificate"
        raise ConnectionSettingsError(f"{path} ({flag}) is not a PEM {kind}")
    return data
