"""A ledger that cannot be reached is named by its URL, never with its password."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from support.repo import make_repo
from typer.testing import CliRunner

from assay.cli.app import build_app


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    "args",
    [["task", "show", "t1"], ["task", "add", "x", "--coder-command", "true", "--sandbox", "none"]],
)
def test_an_unreachable_ledger_is_named_without_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.chdir(make_repo(tmp_path).root)
    port = closed_port()
    url = f"postgresql+psycopg://bob:pg-secret@127.0.0.1:{port}/assay?sslmode=disable"
    monkeypatch.setenv("ASSAY_DATABASE_URL", url)
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 4, result.output
    said = f"assay: cannot open the ledger at postgresql+psycopg://bob:***@127.0.0.1:{port}/assay: "
    assert result.output.startswith(said), result.output
    assert "pg-secret" not in result.output
