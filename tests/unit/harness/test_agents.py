"""An interop test whose program could not be installed skips with the installer's reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import agents


def status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, programs: dict[str, object]) -> None:
    root = tmp_path / "agents"
    (root / "bin").mkdir(parents=True)
    (root / "status.json").write_text(json.dumps({"schema": 1, "programs": programs}))
    (root / "bin" / "claude").write_text("")
    monkeypatch.setattr(agents, "ROOT", tmp_path)
    monkeypatch.setattr(agents, "AGENTS", root)
    monkeypatch.setattr(agents, "STATUS", root / "status.json")


def test_a_program_that_failed_to_install_skips_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reason = "npm install failed: npm error notarget No matching version"
    status(tmp_path, monkeypatch, {"codex": {"installed": False, "version": "9", "reason": reason}})
    with pytest.raises(pytest.skip.Exception, match="codex 9 is not installed: npm install"):
        agents.require("codex")
    with pytest.raises(pytest.skip.Exception, match="aider: not listed"):
        agents.require("aider")


def test_an_installed_program_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    status(tmp_path, monkeypatch, {"claude": {"installed": True, "version": "2.1.332"}})
    assert agents.require("claude") == "2.1.332"


def test_without_a_status_file_the_skip_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agents, "ROOT", tmp_path)
    monkeypatch.setattr(agents, "STATUS", tmp_path / "status.json")
    with pytest.raises(pytest.skip.Exception, match="run `make agents`"):
        agents.require("mini")
