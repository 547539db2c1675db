"""A Temporal behind mTLS through the real commands: a client without the certificate is
refused in one line; `assay worker` with --tls-cert/--tls-key/--tls-ca and `assay serve
--temporal` with only the ASSAY_TEMPORAL_TLS_* variables run a task to done through it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support.in_process import show_json as show
from support.repo import Repo, make_repo, replay_contract
from support.temporal import BINARY, DevServer, ExternalServer
from support.tls_front import TlsFront, make_certs
from support.workers import Workers, assay, serve_once


def test_only_a_client_with_the_certificate_gets_through(
    tmp_path: Path, temporal_server: DevServer | ExternalServer, postgres_url: str
) -> None:
    repo: Repo = make_repo(tmp_path / "work")
    certs = make_certs(tmp_path / "pki")
    with (
        TlsFront(temporal_server.address, certs) as front,
        Workers(front.address, repo.root, postgres_url, tmp_path / "machines") as workers,
    ):
        env = workers.env
        # TLS, the server checked against the CA, but no client certificate: refused.
        bare = assay(
            repo.root, "worker", "--temporal", front.address, "--tls-ca", str(certs.ca), env=env
        )
        assert bare.returncode == 2, bare.stderr
        assert bare.stderr.startswith(f"assay: cannot reach Temporal at {front.address} (TLS)")
        assert "--tls-cert/--tls-key" in bare.stderr and "Traceback" not in bare.stderr
        # The coder's tool of the attack: the `temporal` CLI, without the certificate.
        listed = subprocess.run(
            [str(BINARY), "workflow", "list", "--address", front.address],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert listed.returncode != 0, listed.stdout

        workers.start(max_dispatches=1, args=certs.flags())
        contract = replay_contract(repo, "wrong", "fixed", land="branch")
        task_id = show(repo.root, "task", "add", "--contract", str(contract), env=env)["id"]
        served = serve_once(
            repo.root, front.address, workers.task_queue, {**env, **certs.env()}, poll=0.2
        )
        assert served.returncode == 0, served.stderr
        assert "WARNING" not in served.stderr  # loopback, and with TLS besides
        assert show(repo.root, "task", "show", task_id, env=env)["status"] == "done"
