"""The real Claude Code looping on tool calls: stopped by `assay run --max-tokens`, or left
running when its assay is killed, every call it was answered is in the ledger.

The scripted Messages API answers every call with one more Bash call (1,200 tokens in, 50
out), ``LATENCY`` seconds after it is asked, as a model would. The host reads each call's usage
from Claude Code's stream as it runs (``--include-partial-messages``: a call's input as it
starts, its output as it ends) and stops the program once the run's budget is spent and the
call it is printing has ended: the server answers no call past the one that spent it, and what
the ledger journaled is what the server handed out. (Answered at once, a next call can be
answered before the host's next look: one call past the budget, journaled all the same.)
Unconfined (``sandbox: none``), a claude whose assay was killed goes on calling the model until
recovery stops it; recovery reads what it reported from the output it left.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.agents import AGENTS, AgentRun, Outcome, require, worktree_of
from support.model_server import HandedOut, ModelServer, RecordedRequest, Turn, Usage
from support.repo import ASSAY, make_repo
from support.spending import (
    Journal,
    dispatch_tokens,
    journal,
    mismatches,
    payloads,
    usage_report,
)

pytestmark = pytest.mark.interop
PER_CALL = Usage(1200, 50)
BUDGET = 3000
CWD = r"Primary working directory: (\S+)"
LATENCY = 0.3  # seconds: several of the host's looks at claude's stream


def claude_env(server: ModelServer) -> dict[str, str]:
    return {
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": "sk-ant-any",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
    }


def agent_environ(home: Path) -> dict[str, str]:
    """The environment AgentRun gives `assay`: the agents on PATH, a private HOME."""
    leaky = ("ASSAY_", "ANTHROPIC_", "OPENAI_", "CLAUDE_")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(leaky)}
    environ["PATH"] = f"{AGENTS / 'bin'}{os.pathsep}{environ.get('PATH', '')}"
    environ["HOME"] = str(home)
    return environ


@dataclass
class Stopped:
    outcome: Outcome
    handed: HandedOut
    calls: int
    ledger: Journal
    dispatch_rows: list[int | None]
    report: dict[str, Any]  # assay usage --json


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stopped]:
    """One looping claude run, stopped by the budget flag (shared by the checks below)."""
    require("claude")
    tmp_path = tmp_path_factory.mktemp("claude-budget")
    listing = Turn.call("Bash", {"command": "ls", "description": "List"}, usage=PER_CALL)
    loop = replace(listing, delay_seconds=LATENCY)
    with ModelServer(when_exhausted=loop) as server:
        env = claude_env(server)
        coder = {"kind": "claude", "model": "claude-sonnet-4-5", "max_turns": 50}
        budgets = {"max_attempts": 1, "max_recovery": 0}
        run = AgentRun(make_repo(tmp_path), tmp_path / "home", coder, env, budgets=budgets)
        outcome = run.run(extra=("--max-tokens", str(BUDGET)))
        handed, calls = server.handed_out, len(server.completions)
    root = run.repo.root
    rows = dispatch_tokens(root, outcome.payload["run_id"])
    yield Stopped(outcome, handed, calls, journal(root), rows, usage_report(run.repo))


def test_claude_is_stopped_within_one_call_of_its_budget(stopped: Stopped) -> None:
    payload = stopped.outcome.payload
    assert stopped.outcome.code == 3, stopped.outcome.stderr
    assert (payload["status"], payload["task_status"]) == ("blocked", "held")
    assert "budgets.max_tokens: 3000" in payload["reason"]
    # The third answer spends the budget; a fourth call may have been asked, never answered.
    assert stopped.handed.answers == math.ceil(BUDGET / PER_CALL.total_tokens) == 3
    assert stopped.calls <= stopped.handed.answers + 1
    # The ledger and the payload agree with each other, and on every input token.
    assert stopped.ledger.tokens == payload["usage"]["tokens"] == stopped.dispatch_rows[0]
    assert stopped.report["total"]["tokens"] == stopped.ledger.tokens
    assert stopped.ledger.tokens_in == stopped.handed.tokens_in == 3 * 1200


def test_claude_stopped_mid_run_accounts_for_every_token(stopped: Stopped) -> None:
    payloads = [stopped.outcome.payload]
    assert mismatches(stopped.handed, stopped.ledger, payloads, stopped.report) == []


def test_a_claude_that_outlives_its_killed_assay_is_accounted_for(tmp_path: Path) -> None:
    require("claude")
    listing = Turn.call("Bash", {"command": "ls", "description": "List"}, usage=PER_CALL)
    loop = replace(listing, delay_seconds=LATENCY)
    first: list[Path] = []

    def answer(request: RecordedRequest) -> Turn:
        """The killed run's claude loops; the rerun's finishes at once."""
        worktree = worktree_of(request, CWD)
        first[:] = first or [worktree]
        return loop if worktree == first[0] else Turn.reply("Nothing to change.")

    repo = make_repo(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    with ModelServer(when_exhausted=answer) as server:
        doc = {
            "task": "Make slugify keep digits.",
            "coder": {"kind": "claude", "model": "claude-sonnet-4-5", "max_turns": 50},
            "validators": [{"id": "tests", "kind": "command", "run": "true"}],
            "budgets": {"max_attempts": 2, "max_recovery": 0},
            "land": "merge",
            "env": claude_env(server),
            "sandbox": "none",  # so that it outlives assay (in bwrap it dies with it)
        }
        contract = repo.contract("claude.yaml", yaml.safe_dump(doc))
        held = server.hold(3)
        victim = subprocess.Popen(
            [str(ASSAY), "run", "--contract", str(contract), "--json"],
            cwd=repo.root,
            env=agent_environ(home),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert held.wait(60), "claude never made its third call"
        finally:
            victim.send_signal(signal.SIGKILL)
            victim.wait(timeout=30)
        # Its sixth call waits until recovery has ended it: an answer sent while recovery reads
        # its log could reach no log, and the count below is of answers sent in full.
        sixth = server.hold(6)
        held.open()  # claude still reads: answered, and it goes on
        try:
            deadline = time.monotonic() + 30
            while server.handed_out.answers < 5:  # two more calls after its assay died
                assert time.monotonic() < deadline, "the orphaned claude made no more calls"
                time.sleep(0.05)
            assert sixth.wait(30), "the orphaned claude made no sixth call"  # before the rerun's
            resumed = subprocess.run(
                [str(ASSAY), "run", "--resume", "--json"],
                cwd=repo.root,
                env=agent_environ(home),
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            handed = server.handed_out
        finally:
            sixth.open()
    assert "interrupted, refunded" in resumed.stderr, resumed.stderr
    runs = payloads(repo.root)
    killed = next(iter(runs.values()))
    assert killed["attempts"]["history"][0] == {
        "attempt": 1,
        "outcome": "error",
        "interrupted": True,
    }
    ledger = journal(repo.root)
    report = usage_report(repo)
    # Every call it was answered, before and after its assay died, counted in full: recovery
    # read each call's output from the partial messages the orphaned claude printed.
    assert ledger.tokens_in == handed.tokens_in == report["total"]["tokens_in"]
    assert ledger.tokens_out == handed.tokens_out == report["total"]["tokens_out"]
    assert sum(p["usage"]["tokens"] for p in runs.values()) == ledger.tokens == handed.tokens
    assert killed["usage"]["tokens_in"] >= 5 * PER_CALL.prompt_tokens
