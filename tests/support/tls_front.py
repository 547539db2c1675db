"""A Temporal server that takes only mTLS clients, for tests: throwaway certificates made
with the ``openssl`` CLI, and a TLS front that requires a client certificate signed by their
CA and hands the decrypted gRPC stream to the dev server behind it.

Temporal's development server (``temporal server start-dev``) has no TLS flags, so the
front stands in for a deployment's TLS: the client side (assay's flags, the SDK's TLS
configuration, the handshake) is the real one. It negotiates ALPN ``h2`` as gRPC needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import ssl
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.services import service_missing


@dataclass(frozen=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def flags(self) -> list[str]:
        return [
            "--tls-cert", str(self.client_cert),
            "--tls-key", str(self.client_key),
            "--tls-ca", str(self.ca),
        ]  # fmt: skip

    def env(self) -> dict[str, str]:
        return {
            "ASSAY_TEMPORAL_TLS_CERT": str(self.client_cert),
            "ASSAY_TEMPORAL_TLS_KEY": str(self.client_key),
            "ASSAY_TEMPORAL_TLS_CA": str(self.ca),
        }


def make_certs(folder: Path, server_names: str = "IP:127.0.0.1,DNS:localhost") -> Certs:
    """A CA, a server certificate for ``server_names`` (subjectAltName entries) and a client
    certificate."""
    openssl = shutil.which("openssl")
    if openssl is None:
        service_missing("the openssl command is needed to make throwaway TLS certificates")
    folder.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        done = subprocess.run(
            [str(openssl), *args], cwd=folder, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            pytest.fail(f"openssl {' '.join(args)}: {done.stderr}")

    days = ["-days", "1"]
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca-key.pem",
        "-out", "ca.pem", *days, "-subj", "/CN=assay test CA")  # fmt: skip
    for name, extension in (
        ("server", f"subjectAltName={server_names}\nextendedKeyUsage=serverAuth\n"),
        ("client", "extendedKeyUsage=clientAuth\n"),  # v3: rustls refuses a v1 certificate
    ):
        (folder / f"{name}.ext").write_text(extension)
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}-key.pem",
            "-out", f"{name}.csr", "-subj", f"/CN={name}")  # fmt: skip
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
            "-CAcreateserial", "-out", f"{name}.pem", *days, "-extfile", f"{name}.ext")  # fmt: skip
    return Certs(
        ca=folder / "ca.pem",
        server_cert=folder / "server.pem",
        server_key=folder / "server-key.pem",
        client_cert=folder / "client.pem",
        client_key=folder / "client-key.pem",
    )


class TlsFront:
    """``with TlsFront(upstream, certs) as front``: ``front.address`` takes mTLS clients
    only."""

    def __init__(self, upstream: str, certs: Certs) -> None:
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(certs.ca))
        self.context.load_cert_chain(str(certs.server_cert), str(certs.server_key))
        self.context.verify_mode = ssl.CERT_REQUIRED
        self.context.set_alpn_protocols(["h2"])
        self.address = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    def __enter__(self) -> TlsFront:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        port = self._server.sockets[0].getsockname()[1]
        self.address = f"127.0.0.1:{port}"
        return self

    def __exit__(self, *_: object) -> None:
        async def shut() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()

        asyncio.run_coroutine_threadsafe(shut(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _start(self) -> asyncio.Server:
        def quiet(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
            """A handshake refused (a client without the certificate) is reported here; the
            test reads the client's side of it."""

        self._loop.set_exception_handler(quiet)
        return await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.context)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError, ssl.SSLError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError, RuntimeError):
        writer.close()
