"""Driving the CLI in-process on a fresh repository: ``main(argv)`` with captured output, and
the repository's ledger, for the CLI tests that need no ``assay`` process."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.adapters.store.sql import Ledger
from assay.cli.main import main
from support.repo import git

_ASSAY_SETTINGS = ("ASSAY_HOME", "ASSAY_DATABASE_URL", "ASSAY_TEMPORAL", "ASSAY_DEBUG")


def fresh_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with one commit on main, made the working folder, no assay setting set."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("a\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "init")
    for name in _ASSAY_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(root)
    return root


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[object, str, str]:
    """``assay ARGS`` in this process: its exit code, stdout and stderr."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out, err = capsys.readouterr()
    return done.value.code, out, err


def ledger_of(repo: Path) -> Ledger:
    return Ledger.open(f"sqlite:///{repo / '.assay' / 'assay.db'}")
