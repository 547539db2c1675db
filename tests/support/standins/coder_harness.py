"""Helpers for the coder adapter tests: a real git repository as the worktree, a dispatch
request whose PATH starts with the stand-ins, and what the stand-in recorded of its argv."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from assay.adapters.coders.base import DispatchRequest
from assay.core.usage import UsageFigures

STANDINS = Path(__file__).resolve().parent
# The stand-ins start with ``#!/usr/bin/env python3``: the test interpreter's own directory
# comes next on PATH so that is the python3 they get (no version-manager shim to go through).
SEARCH_PATH = os.pathsep.join([str(STANDINS), str(Path(sys.executable).parent), os.environ["PATH"]])


_TEMPLATE: list[Path] = []


def git_repo(path: Path) -> Path:
    """A small committed repository (README and one source file), copied from one made once
    per test process."""
    if not _TEMPLATE:
        home = tempfile.mkdtemp(prefix="assay-coder-repo-")
        atexit.register(shutil.rmtree, home, True)
        _TEMPLATE.append(_new_repo(Path(home) / "repo"))
    shutil.copytree(_TEMPLATE[0], path, symlinks=True)
    return path


def _new_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    (path / "README.md").write_text("# demo\n")
    (path / "app.py").write_text("def answer():\n    return 41\n")
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "init"],
    ):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)
    return path


def changed(repo: Path) -> list[str]:
    """Paths git sees as changed or new in the worktree (the authority on what was written)."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(line[3:] for line in out.splitlines())


def make_request(
    tmp_path: Path,
    *,
    scenario: str = "edit",
    settings: Mapping[str, Any] | None = None,
    max_turns: int | None = None,
    timeout: float = 20.0,
    path: str | None = None,
    env: Mapping[str, str] | None = None,
    prompt: str = "Write standin.txt saying hello.",
) -> DispatchRequest:
    worktree = tmp_path / "worktree"
    if not worktree.exists():
        git_repo(worktree)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    child_env = {
        "PATH": path if path is not None else SEARCH_PATH,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "STANDIN_SCENARIO": scenario,
        "STANDIN_RECORD": str(tmp_path / "record.json"),
        "STANDIN_SLEEP": "30",
        **(env or {}),
    }
    return DispatchRequest(
        worktree=worktree,
        prompt=prompt,
        dispatch_id="d-1",
        attempt=1,
        seat=1,
        halt_state_dir=tmp_path / "halt-state",
        report_path=tmp_path / "report.json",
        log_dir=tmp_path / "logs",
        env=child_env,
        settings=dict(settings or {}),
        timeout_seconds=timeout,
        max_turns=max_turns,
    )


def recorded(tmp_path: Path) -> dict[str, Any]:
    """The argv, stdin and cwd the stand-in received."""
    data: dict[str, Any] = json.loads((tmp_path / "record.json").read_text())
    return data


class BudgetMeter:
    """A :class:`~assay.adapters.coders.base.UsageMeter` for tests: it keeps every report, and
    says stop once the reported tokens reach ``max_tokens`` (or at once, with ``spent``)."""

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        remaining_cost_usd: float | None = None,
        spent: str | None = None,
    ) -> None:
        self.max_tokens = max_tokens
        self.remaining = remaining_cost_usd
        self.spent = spent
        self.reports: list[UsageFigures] = []

    def report(self, figures: UsageFigures) -> None:
        self.reports.append(figures)

    def stop_reason(self) -> str | None:
        if self.spent is not None:
            return self.spent
        used = self.reports[-1].tokens if self.reports else 0
        if self.max_tokens is not None and used >= self.max_tokens:
            return f"the run spent {used} tokens of its {self.max_tokens}-token budget"
        return None

    def remaining_cost_usd(self) -> float | None:
        return self.remaining

    def remaining_tokens(self) -> int | None:
        if self.max_tokens is None:
            return None
        return max(0, self.max_tokens - (self.reports[-1].tokens if self.reports else 0))
