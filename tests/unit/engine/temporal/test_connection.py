"""The Temporal connection's credentials: from flags, else the environment; checked before
anything connects, with a sentence that never holds the API key; mapped onto the SDK's
``Client.connect`` options (the real mTLS handshake: test_tls_e2e.py)."""

from __future__ import annotations

import asyncio
import os
import socket
import urllib.request
from pathlib import Path

import pytest
import typer
from support.in_process import run_assay
from support.repo import make_repo
from support.scripted_effects import TemporalEnv
from support.tls_front import TlsFront, make_certs
from temporalio.service import TLSConfig

from assay.adapters.temporal_connection import (
    ConnectionSettingsError,
    TemporalConnection,
    is_loopback,
)
from assay.cli.temporal_options import temporal_connection
from assay.engine.temporal.client import (
    TemporalUnreachable,
    connect,
    connect_options,
    metrics_runtime,
)

KEY = "tk-0123456789abcdef-secret"
CERT_PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
KEY_PEM = b"-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"


@pytest.fixture
def pems(tmp_path: Path) -> dict[str, Path]:
    files = {"cert": CERT_PEM, "key": KEY_PEM, "ca": CERT_PEM}
    for name, data in files.items():
        (tmp_path / f"{name}.pem").write_bytes(data)
    return {name: tmp_path / f"{name}.pem" for name in files}


def settle(environ: dict[str, str] | None = None, **flags: object) -> TemporalConnection:
    return TemporalConnection.settle("10.0.0.1:7233", "ns", environ=environ or {}, **flags)  # type: ignore[arg-type]


def refused(environ: dict[str, str] | None = None, **flags: object) -> str:
    with pytest.raises(ConnectionSettingsError) as error:
        settle(environ, **flags).credentials(environ or {})
    assert KEY not in str(error.value)
    return str(error.value)


def test_mtls_maps_onto_the_sdks_tls_config(pems: dict[str, Path]) -> None:
    made = settle(tls_cert=pems["cert"], tls_key=pems["key"], tls_ca=pems["ca"])
    options = connect_options(made.credentials({}), made.namespace)
    assert options["tls"] == TLSConfig(
        server_root_ca_cert=CERT_PEM, client_cert=CERT_PEM, client_private_key=KEY_PEM
    )
    assert options["api_key"] is None and options["namespace"] == "ns"
    assert made.secured and made.describe() == "mTLS"


def test_a_server_name_is_the_tls_domain_and_turns_tls_on(pems: dict[str, Path]) -> None:
    made = settle(tls_ca=pems["ca"], tls_server_name="temporal.internal")
    options = connect_options(made.credentials({}), made.namespace)
    assert options["tls"] == TLSConfig(server_root_ca_cert=CERT_PEM, domain="temporal.internal")
    alone = settle({"ASSAY_TEMPORAL_TLS_SERVER_NAME": "temporal.internal"})
    assert connect_options(alone.credentials({}), alone.namespace)["tls"] == TLSConfig(
        domain="temporal.internal"
    )
    assert alone.secured and alone.describe() == "TLS as temporal.internal"
    assert alone.environment() == {"ASSAY_TEMPORAL_TLS_SERVER_NAME": "temporal.internal"}
    flagged = settle({"ASSAY_TEMPORAL_TLS_SERVER_NAME": "env.example"}, tls_server_name="a.b")
    assert flagged.tls_server_name == "a.b"
    assert "is no host name" in refused(tls_server_name="temporal internal")


@pytest.mark.parametrize(
    "command",
    [["worker", "--temporal", "10.0.0.1:7233"], ["serve", "--temporal", "10.0.0.1:7233", "--once"]],
)
def test_every_command_that_talks_to_temporal_takes_a_server_name(
    tmp_path: Path, command: list[str]
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    helped = run_assay([command[0], "--help"], cwd=tmp_path, env=env)
    assert "--tls-server-name" in helped.stdout and "TLS_SERVER_NAME" in helped.stdout
    done = run_assay([*command, "--tls-server-name", "temporal internal"], cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stderr
    assert "--tls-server-name (or $ASSAY_TEMPORAL_TLS_SERVER_NAME) 'temporal internal' is no" in (
        done.stderr
    )


def test_an_api_key_is_read_from_the_variable_named_and_always_goes_over_tls() -> None:
    made = settle(api_key_env="TEMPORAL_API_KEY")
    credentials = made.credentials({"TEMPORAL_API_KEY": f" {KEY}\n"})
    options = connect_options(credentials, made.namespace)
    assert options["api_key"] == KEY and options["tls"] is True
    assert KEY not in repr(credentials) and KEY not in repr(made)
    assert made.describe() == "TLS + API key $TEMPORAL_API_KEY"


def test_nothing_configured_is_plain_and_warned_about_beyond_loopback() -> None:
    made = settle()
    options = connect_options(made.credentials({}), made.namespace)
    assert options["tls"] is False and options["api_key"] is None
    warning = made.insecure_warning()
    assert warning is not None and "10.0.0.1:7233" in warning and "--api-key-env" in warning
    local = TemporalConnection.settle("127.0.0.1:7233", "default", environ={})
    assert local.insecure_warning() is None
    assert settle(tls_ca=Path("/x")).insecure_warning() is None


def test_the_environment_fills_what_the_flags_leave_and_flags_win(
    pems: dict[str, Path], tmp_path: Path
) -> None:
    environ = {
        "ASSAY_TEMPORAL_TLS_CERT": str(pems["cert"]),
        "ASSAY_TEMPORAL_TLS_KEY": str(pems["key"]),
        "ASSAY_TEMPORAL_TLS_CA": str(tmp_path / "env-ca.pem"),
        "ASSAY_TEMPORAL_API_KEY_ENV": "FROM_ENV",
    }
    made = settle(environ, tls_ca=pems["ca"], api_key_env="FROM_FLAG")
    assert (made.tls_cert, made.tls_key, made.tls_ca) == (pems["cert"], pems["key"], pems["ca"])
    assert made.api_key_env == "FROM_FLAG"
    assert made.environment()["ASSAY_TEMPORAL_API_KEY_ENV"] == "FROM_FLAG"
    assert made.environment()["ASSAY_TEMPORAL_TLS_CA"] == str(pems["ca"].absolute())


def test_temporals_own_variables_come_last(pems: dict[str, Path], tmp_path: Path) -> None:
    """Temporal's standard environment configuration is read as the CLI and SDKs read it,
    after the flag and assay's own variable."""
    standard = {
        "TEMPORAL_TLS_CLIENT_CERT_PATH": str(pems["cert"]),
        "TEMPORAL_TLS_CLIENT_KEY_PATH": str(pems["key"]),
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(pems["ca"]),
        "TEMPORAL_TLS_SERVER_NAME": "temporal.internal",
        "TEMPORAL_API_KEY": KEY,
    }
    made = settle(standard)
    assert (made.tls_cert, made.tls_key, made.tls_ca) == (pems["cert"], pems["key"], pems["ca"])
    assert (made.tls_server_name, made.api_key_env) == ("temporal.internal", "TEMPORAL_API_KEY")
    assert made.credentials(standard).api_key == KEY
    ours = settle({**standard, "ASSAY_TEMPORAL_TLS_CA": str(tmp_path / "ours.pem")})
    assert ours.tls_ca == tmp_path / "ours.pem"
    tls_only = settle({"TEMPORAL_TLS": "true"})
    assert tls_only.credentials({}).tls and tls_only.tls_server_name == "10.0.0.1"
    assert not settle({"TEMPORAL_TLS": "false"}).credentials({}).tls


def test_the_worker_reads_temporals_address_and_namespace(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "COLUMNS": "200"}
    shown = run_assay(["worker", "--help"], cwd=tmp_path, env=env)
    assert "TEMPORAL_ADDRESS" in shown.stdout and "TEMPORAL_NAMESPACE" in shown.stdout
    missing = run_assay(["worker"], cwd=tmp_path, env=env)
    assert missing.returncode == 2 and "--temporal" in missing.stderr


@pytest.mark.parametrize(
    ("flags", "environ", "said"),
    [
        ({"tls_cert": "cert"}, {}, "--tls-cert (or $ASSAY_TEMPORAL_TLS_CERT) needs --tls-key"),
        ({"tls_key": "key"}, {}, "--tls-key (or $ASSAY_TEMPORAL_TLS_KEY) needs --tls-cert"),
        ({"tls_ca": "missing"}, {}, "cannot read the Temporal CA certificate"),
        ({"tls_cert": "key", "tls_key": "key"}, {}, "(--tls-cert) is not a PEM certificate"),
        ({"tls_cert": "cert", "tls_key": "cert"}, {}, "(--tls-key) is not a PEM private key"),
        ({"api_key_env": "K"}, {}, "$K is not set or empty"),
        ({"api_key_env": "K"}, {"K": "  "}, "$K is not set or empty"),
        ({"api_key_env": "K"}, {"K": "short-key"}, "is 9 bytes long; a key shorter than 16"),
        ({"api_key_env": "K"}, {"K": KEY + "\u00e9"}, "only printable ASCII"),
        ({"api_key_env": KEY}, {}, "takes the name of the variable"),
        ({}, {"ASSAY_TEMPORAL_API_KEY_ENV": "has space"}, "not the key itself"),
    ],
)
def test_bad_credentials_are_refused_in_one_sentence(
    pems: dict[str, Path], flags: dict[str, str], environ: dict[str, str], said: str
) -> None:
    given: dict[str, object] = {}
    for flag, value in flags.items():  # a file's short name, or the variable's name
        given[flag] = value if flag == "api_key_env" else pems.get(value, Path("/nowhere/x.pem"))
    assert said in refused(environ, **given)


def test_loopback_addresses() -> None:
    for target in ("127.0.0.1:7233", "127.3.2.1:1", "localhost:7233", "[::1]:7233"):
        assert is_loopback(target), target
    for target in ("10.0.0.1:7233", "0.0.0.0:7233", "temporal.example:7233", "[::]:7233", ":x"):
        assert not is_loopback(target), target


def test_the_commands_refuse_bad_settings_with_exit_2_and_warn_loudly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ASSAY_TEMPORAL_API_KEY_ENV", "TEMPORAL_API_KEY")
    monkeypatch.setenv("TEMPORAL_API_KEY", "short")
    with pytest.raises(typer.Exit) as stopped:
        temporal_connection("10.0.0.1:7233", "default")
    assert stopped.value.exit_code == 2
    assert "is 5 bytes long" in capsys.readouterr().err
    monkeypatch.delenv("ASSAY_TEMPORAL_API_KEY_ENV")
    with pytest.raises(typer.Exit):  # Temporal's own variable is read too
        temporal_connection("10.0.0.1:7233", "default")
    capsys.readouterr()
    monkeypatch.delenv("TEMPORAL_API_KEY")
    temporal_connection("10.0.0.1:7233", "default")
    assert "assay: WARNING: Temporal at 10.0.0.1:7233 is reached with no TLS" in (
        capsys.readouterr().err
    )
    temporal_connection("10.0.0.1:7233", "default", warn=False)
    temporal_connection("127.0.0.1:7233", "default")
    assert capsys.readouterr().err == ""


def test_a_namespace_the_server_lacks_is_named_at_connect_not_after_ready(
    temporal_env: TemporalEnv,
) -> None:
    target = temporal_env.env.client.service_client.config.target_host

    async def reach(namespace: str) -> str:
        client = await connect(TemporalConnection(target, namespace), environ={})
        return client.namespace

    assert temporal_env.run(lambda _: reach("default")) == "default"
    with pytest.raises(TemporalUnreachable) as missing:
        temporal_env.run(lambda _: reach("nope"))
    assert "has no namespace 'nope'" in str(missing.value)
    assert "--namespace" in str(missing.value)


def test_a_certificate_for_another_name_is_reached_only_with_its_server_name(
    temporal_env: TemporalEnv, tmp_path: Path
) -> None:
    """The real handshake: a server certificate issued for temporal.internal, dialled at
    127.0.0.1, is refused unless --tls-server-name names it."""
    target = temporal_env.env.client.service_client.config.target_host
    certs = make_certs(tmp_path / "pki", server_names="DNS:temporal.internal")
    flags = {"tls_cert": certs.client_cert, "tls_key": certs.client_key, "tls_ca": certs.ca}

    async def reach(address: str, **extra: str) -> str:
        connection = TemporalConnection.settle(address, "default", environ={}, **flags, **extra)  # type: ignore[arg-type]
        client = await connect(connection, environ={})
        return client.namespace

    with TlsFront(target, certs) as front:
        with pytest.raises(TemporalUnreachable) as refused:
            temporal_env.run(lambda _: reach(front.address))
        assert "--tls-server-name" in str(refused.value)
        named = temporal_env.run(
            lambda _: reach(front.address, tls_server_name="temporal.internal")
        )
        assert named == "default"


def test_the_sdks_metrics_are_served_for_prometheus(temporal_env: TemporalEnv) -> None:
    target = temporal_env.env.client.service_client.config.target_host
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    runtime = metrics_runtime(f"127.0.0.1:{port}")

    async def reach() -> None:
        await connect(TemporalConnection(target, "default"), environ={}, runtime=runtime)

    temporal_env.run(lambda _: reach())
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
        served = page.read().decode()
    assert "temporal_request" in served, served[:500]


def test_metrics_on_an_address_it_cannot_listen_on_are_refused_in_one_sentence() -> None:
    with pytest.raises(TemporalUnreachable, match="cannot serve metrics on nowhere"):
        metrics_runtime("nowhere")


def test_a_server_that_will_not_say_whether_it_has_the_namespace_is_trusted() -> None:
    """A key without the right to describe its namespace (Temporal Cloud's narrow keys) must
    not keep a worker from starting: only a server that says NOT_FOUND is refused."""
    from temporalio.service import RPCError, RPCStatusCode

    from assay.engine.temporal import client as client_module

    class Service:
        def __init__(self, status: RPCStatusCode) -> None:
            self.status = status

        async def describe_namespace(self, _request: object) -> None:
            raise RPCError("no", self.status, b"")

    class Client:
        def __init__(self, status: RPCStatusCode) -> None:
            self.workflow_service = Service(status)

    connection = TemporalConnection("127.0.0.1:7233", "ns")
    check = client_module._namespace_exists
    asyncio.run(check(Client(RPCStatusCode.PERMISSION_DENIED), connection))  # type: ignore[arg-type]
    with pytest.raises(TemporalUnreachable, match="has no namespace 'ns'"):
        asyncio.run(check(Client(RPCStatusCode.NOT_FOUND), connection))  # type: ignore[arg-type]


def test_a_worker_for_a_namespace_the_server_lacks_exits_2_before_ready(
    temporal_env: TemporalEnv, tmp_path: Path, postgres_url: str
) -> None:
    target = temporal_env.env.client.service_client.config.target_host
    repo = make_repo(tmp_path)
    done = repo.main(
        "worker", "--temporal", target, "--namespace", "nope", "--json",
        ASSAY_DATABASE_URL=postgres_url,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "has no namespace 'nope'" in done.stderr and "Traceback" not in done.stderr
    assert "ready" not in done.stdout


def test_serve_temporal_only_submits_so_it_runs_outside_any_repository(
    temporal_env: TemporalEnv, tmp_path: Path, postgres_url: str
) -> None:
    target = temporal_env.env.client.service_client.config.target_host
    elsewhere = tmp_path / "not-a-repository"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    env["ASSAY_DATABASE_URL"] = postgres_url
    args = ["serve", "--temporal", target, "--once", "--no-web"]
    done = run_assay(args, cwd=elsewhere, env=env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert list(elsewhere.iterdir()) == []  # nothing made where it ran
