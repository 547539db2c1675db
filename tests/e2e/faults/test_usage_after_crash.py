"""A run killed while its `llm` coder spends still accounts for every token it was handed.

The coder talks to the scripted server, which counts what the answers it sent reported. The
real `assay run` is killed (SIGKILL while a model call is in flight, or ``ASSAY_CRASH_AT`` at
each effect boundary), then `assay run --resume` closes the dead run and runs the task again:
the interrupted run's payload counts what its coder was handed (its cost unknown, not zero,
when the server named none), and the ledger's usage journal, summed over both runs, is the
server's count.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.crash import LANDED_POINTS
from support.model_server import ModelServer, RecordedRequest, Turn, Usage
from support.repo import ASSAY, CHECK_TESTS, Repo, make_repo
from support.spending import dispatch_tokens, journal, mismatches, payloads, usage_report

from assay.core.vocab import CrashPoint
from assay.engine.crashpoints import CRASH_EXIT

LOOP = Turn.call("list_files", {"path": "."}, usage=Usage(100, 20))
FIX = Turn.call(
    "replace",
    {"path": "src/slug.py", "old": "isalpha", "new": "isalnum"},
    usage=Usage(400, 30),
)
FINISH = Turn.call("finish", {"summary": "slugify keeps digits"}, usage=Usage(450, 9))
VERDICT = Turn.call(
    "verdict",
    {"severity": "pass", "justification": "Digits are kept.", "findings": []},
    usage=Usage(700, 40),
)


def fixer(request: RecordedRequest) -> Turn:
    """A coder that fixes the bug in two answers, and a judge that passes it."""
    choice = request.body.get("tool_choice") if isinstance(request.body, dict) else None
    if isinstance(choice, dict) and choice.get("function", {}).get("name") == "verdict":
        return VERDICT
    return FIX if len(request.messages) <= 2 else FINISH


def contract(repo: Repo, server: ModelServer, *, judged: bool = False) -> Path:
    judge = (
        f'  - {{id: review, kind: judge, model: m, base_url: "{server.base_url}", '
        'criteria: ["the public API is unchanged"]}\n'
        if judged
        else ""
    )
    return repo.contract(
        "llm.yaml",
        f"""task: Make slugify keep digits.
scope: {{allow: ["src/**"]}}
coder: {{kind: llm, model: m, base_url: "{server.base_url}", max_turns: 50}}
validators:
  - {{id: tests, kind: command, run: "{CHECK_TESTS}"}}
{judge}budgets: {{max_attempts: 2, max_recovery: 0}}
env: {{OPENAI_API_KEY: local-test-key}}
land: merge
""",
    )


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}


@pytest.mark.parametrize("cost", [None, 0.125], ids=["unpriced", "priced"])
def test_a_run_killed_mid_call_counts_what_its_coder_was_handed(
    tmp_path: Path, cost: float | None
) -> None:
    repo = make_repo(tmp_path)
    answered = 3
    phase = {"fixing": False}
    loop = Turn.call("list_files", {"path": "."}, usage=Usage(100, 20, cost=cost))

    def answer(request: RecordedRequest) -> Turn:
        return fixer(request) if phase["fixing"] else loop

    with ModelServer(when_exhausted=answer) as server:
        held = server.hold(answered + 1)  # the fourth call waits: assay dies during it
        victim = subprocess.Popen(
            [str(ASSAY), "run", "--contract", str(contract(repo, server)), "--json"],
            cwd=repo.root,
            env=_environ(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert held.wait(60), "the coder never made its fourth call"
        finally:
            victim.send_signal(signal.SIGKILL)
            victim.wait(timeout=30)
        held.open()  # nobody is left to read it: not handed out
        before = server.handed_out
        phase["fixing"] = True
        resumed = repo.main("run", "--resume", "--json")
        handed = server.handed_out
    assert resumed.returncode == 0, resumed.stderr
    assert server.dropped == 1
    assert (before.answers, before.tokens) == (answered, answered * 120)

    runs = payloads(repo.root)
    assert len(runs) == 2
    killed, rerun = runs.values()
    assert (killed["status"], rerun["status"]) == ("failed", "merged")
    assert killed["usage"]["tokens"] == before.tokens == 360
    if cost is None:  # the server named no cost: unknown, not 0.0
        assert killed["usage"]["cost_usd"] is None
        assert killed["usage"]["unpriced_dispatches"] == 1
    else:  # the three answers at their cost; the call assay died waiting for, perhaps
        # billed though nobody read its answer, leaves the total unknown (never exact)
        assert killed["usage"]["priced_cost_usd"] == before.cost == 3 * cost
        assert killed["usage"]["cost_usd"] is None
        assert killed["usage"]["unpriced_dispatches"] == 1
    assert killed["attempts"]["history"] == [
        {"attempt": 1, "outcome": "error", "interrupted": True}
    ]
    assert dispatch_tokens(repo.root, killed["run_id"]) == [360]
    assert rerun["usage"]["tokens"] == handed.tokens - before.tokens == 430 + 459
    assert mismatches(handed, journal(repo.root), runs.values(), usage_report(repo)) == []


BOUNDARIES = [p.value for p in CrashPoint if p is not CrashPoint.JUDGED]
CODER_TOKENS = 430 + 459  # the fix and the finish
JUDGE_TOKENS = 740
# What the crashed run was handed by the time it died, by the boundary it died at.
SPENT_BY = {
    CrashPoint.TASK_STARTED: 0,
    CrashPoint.ARMED: 0,
    CrashPoint.DISPATCH_STARTED: 0,
    CrashPoint.DISPATCH_ENDED: CODER_TOKENS,
}


@pytest.mark.parametrize("crash_at", BOUNDARIES)
def test_killed_at_a_boundary_the_ledger_counts_what_the_server_handed_out(
    tmp_path: Path, crash_at: str
) -> None:
    repo = make_repo(tmp_path)
    with ModelServer(when_exhausted=fixer) as server:
        llm = str(contract(repo, server, judged=True))
        killed = repo.assay("run", "--contract", llm, ASSAY_CRASH_AT=crash_at)
        assert killed.returncode == CRASH_EXIT, killed.stderr
        first = server.handed_out
        resumed = repo.main("run", "--resume", "--json")
        handed = server.handed_out
    assert resumed.returncode == 0, resumed.stderr
    point = CrashPoint(crash_at)
    assert first.tokens == SPENT_BY.get(point, CODER_TOKENS + JUDGE_TOKENS)
    runs = payloads(repo.root)
    statuses = [p["status"] for p in runs.values()]
    assert statuses == (["merged"] if point in LANDED_POINTS else ["failed", "merged"])
    crashed: dict[str, Any] = next(iter(runs.values()))
    assert crashed["usage"]["tokens"] == first.tokens  # what it was handed before it died
    ledger = journal(repo.root)
    assert mismatches(handed, ledger, runs.values(), usage_report(repo)) == []
    assert ledger.cost is None  # no answer named a cost


def test_a_run_that_died_after_spending_its_budget_is_not_run_again(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    with ModelServer(when_exhausted=LOOP) as server:
        looping = repo.contract(
            "loop.yaml",
            f"""task: Make slugify keep digits.
coder: {{kind: llm, model: m, base_url: "{server.base_url}", max_turns: 500}}
validators:
  - {{id: tests, kind: command, run: "{CHECK_TESTS}"}}
budgets: {{max_tokens: 1000}}
env: {{OPENAI_API_KEY: local-test-key}}
land: merge
""",
        )
        # The budget stops the coder after 9 answers (1,080 tokens); assay dies right after.
        killed = repo.assay("run", "--contract", str(looping), ASSAY_CRASH_AT="dispatch_ended")
        assert killed.returncode == CRASH_EXIT, killed.stderr
        assert server.handed_out.tokens == 1080
        resumed = repo.main("run", "--resume", "--json")
        handed = server.handed_out
    assert (
        mismatches(handed, journal(repo.root), payloads(repo.root).values(), usage_report(repo))
        == []
    )
    # What a live run would have done: the task held on the budget, no second budget spent.
    assert resumed.returncode == 3, resumed.stderr
    assert handed.tokens == 1080
