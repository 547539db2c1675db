"""Driving the real agent programs through the real ``assay run``, against the scripted server.

``tools/install-agents.sh`` (``make agents``) installs each program at a pinned version into
``.cache/`` and writes ``.cache/agents/status.json``; :func:`require` skips a test with the
reason written there when its program could not be installed, never falling back to a
stand-in. :class:`AgentRun` writes a contract, runs ``assay run --json`` with a clean
environment (the programs' folder on PATH, a temporary HOME, no credential of the operator's),
and reads back the payload and the task.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.in_process import show_json
from support.model_server import RecordedRequest
from support.repo import ASSAY, PYTEST, Repo

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / ".cache" / "agents"
STATUS = AGENTS / "status.json"
FIXED_LINE = '    return "-".join(w.lower() for w in text.split() if w.isalnum())\n'
BUGGY_LINE = '    return "-".join(w.lower() for w in text.split() if w.isalpha())\n'
TASK = "Make slugify keep digits; tests/test_slug.py::test_digits must pass."
# Variables of the operator's shell that must not reach a run under test.
_LEAKY = ("ASSAY_", "ANTHROPIC_", "OPENAI_", "CLAUDE_", "CODEX_", "AIDER_", "MSWEA_", "LITELLM_")


def require(program: str) -> str:
    """The installed version of ``program``; skips the test (with the reason) when it is not."""
    if not STATUS.is_file():
        pytest.skip(f"{program}: {STATUS.relative_to(ROOT)} is missing; run `make agents`")
    entry = json.loads(STATUS.read_text()).get("programs", {}).get(program)
    if not entry:
        pytest.skip(f"{program}: not listed in {STATUS.relative_to(ROOT)}; run `make agents`")
    if not entry.get("installed"):
        pytest.skip(f"{program} {entry.get('version')} is not installed: {entry.get('reason')}")
    if not (AGENTS / "bin" / program).exists():
        pytest.skip(f"{program}: {AGENTS / 'bin' / program} is missing; run `make agents`")
    return str(entry["version"])


def worktree_of(request: RecordedRequest, pattern: str) -> Path:
    """The working directory a program told its model (``pattern`` has one group), searched in
    every string of the request's JSON body."""
    for text in _strings(request.body):
        if match := re.search(pattern, text):
            return Path(match.group(1))
    raise AssertionError(f"no working directory in the request ({pattern})")


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@dataclass
class Outcome:
    """One ``assay run``: its exit code, output, payload and the task the ledger holds."""

    code: int
    stdout: str
    stderr: str
    payload: dict[str, Any]
    task: dict[str, Any]
    seconds: float

    @property
    def seat(self) -> dict[str, Any]:
        seats: list[dict[str, Any]] = self.payload["candidates"]
        assert len(seats) == 1, seats
        return seats[0]


@dataclass
class AgentRun:
    """A contract for one coder, run with ``assay run`` in ``repo``."""

    repo: Repo
    home: Path
    coder: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    validators: list[dict[str, Any]] = field(
        default_factory=lambda: [{"id": "tests", "kind": "command", "run": PYTEST}]
    )
    budgets: dict[str, int] = field(default_factory=lambda: {"max_attempts": 3, "max_recovery": 0})
    task: str = TASK

    def contract(self) -> Path:
        doc = {
            "task": self.task,
            "anchors": ["src/slug.py"],
            "scope": {"allow": ["src/**"]},
            "coder": {"timeout_seconds": 180, **self.coder},
            "validators": self.validators,
            "budgets": self.budgets,
            "land": "merge",
            "env": self.env,
        }
        return self.repo.contract(f"{self.coder['kind']}.yaml", yaml.safe_dump(doc))

    def run(self, *, timeout: float = 300, extra: Sequence[str] = ()) -> Outcome:
        """``assay run --contract ... --json`` and ``extra`` (more flags)."""
        self.home.mkdir(parents=True, exist_ok=True)
        environ = {k: v for k, v in os.environ.items() if not k.startswith(_LEAKY)}
        environ["PATH"] = f"{AGENTS / 'bin'}{os.pathsep}{environ.get('PATH', '')}"
        environ["HOME"] = str(self.home)
        started = time.monotonic()
        done = subprocess.run(
            [str(ASSAY), "run", "--contract", str(self.contract()), "--json", *extra],
            cwd=self.repo.root,
            capture_output=True,
            text=True,
            env=environ,
            timeout=timeout,
            check=False,
        )
        seconds = time.monotonic() - started
        assert done.stdout.strip(), f"no payload (exit {done.returncode}): {done.stderr}"
        payload = json.loads(done.stdout)
        # The task as the ledger holds it, read in this process (a process less per test).
        task = show_json(self.repo.root, "task", "show", payload["task_id"], env=environ)
        return Outcome(done.returncode, done.stdout, done.stderr, payload, task, seconds)

    def seat_log(self, outcome: Outcome, name: str) -> str:
        """A file the coder's seat left in the run folder (its log, its trajectory)."""
        runs = self.repo.root / ".assay" / "runs" / str(outcome.payload["run_id"])
        return (runs / "attempt-1" / "seat-1" / name).read_text(errors="replace")


def slug_source(repo: Repo) -> str:
    return (repo.root / "src" / "slug.py").read_text()


def assert_merged(outcome: Outcome, repo: Repo) -> None:
    """The task is done: the fix was merged and the real pytest validator passed."""
    payload = outcome.payload
    assert outcome.code == 0, (outcome.stderr, payload["reason"])
    assert (payload["status"], payload["task_status"]) == ("merged", "done")
    assert payload["attempts"]["total"] == 1
    severities = {r["validator_id"]: r["severity"] for r in payload["validator_results"]}
    assert severities["tests"] == "pass", payload["validator_results"]
    assert outcome.seat["files_changed"] == ["src/slug.py"]
    assert outcome.seat["stop_reason"] == "completed"
    assert FIXED_LINE in slug_source(repo)


def assert_refunded_quota(outcome: Outcome) -> None:
    """Every seat lost to a provider's limit: the run failed, the attempt was refunded."""
    payload = outcome.payload
    assert outcome.code == 1, (outcome.stderr, payload["reason"])
    assert (payload["status"], payload["task_status"]) == ("failed", "failed")
    assert payload["attempt_spent"] is False
    assert outcome.seat["lost_to_quota"] is True
    assert outcome.seat["stop_reason"] == "provider_fault"
    assert outcome.task["attempts"] == 0
    assert payload["reason"].startswith("every seat lost to quota")


def assert_turn_budget(outcome: Outcome) -> None:
    """The coder stopped on its turn limit: recorded as such, the budget halt warned."""
    payload = outcome.payload
    assert outcome.seat["stop_reason"] == "turn_budget"
    assert "halt-budget-exhausted" in [h["name"] for h in payload["halts"]["warnings"]]
    assert payload["task_status"] == "failed" and payload["attempt_spent"] is True
    assert outcome.task["attempts"] == 1
