"""The real Claude Code (`claude -p`) through `assay run`, against the scripted Messages API.

Claude Code is pointed at the server with ``ANTHROPIC_BASE_URL``; the contract's ``env:``
block passes it (the engine's child environment is an allowlist), with a throwaway key,
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`` and ``CLAUDE_CODE_MAX_RETRIES=0`` (by default it
retries a 429 ten times, for minutes). HOME is a temporary folder, so ~/.claude is untouched.

The brief tests script a model that knows nothing of assay: each step reads what to do from
the request Claude Code actually sent (the brief in its system prompt), never from the test.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.agents import (
    BUGGY_LINE,
    FIXED_LINE,
    AgentRun,
    assert_merged,
    assert_refunded_quota,
    assert_turn_budget,
    require,
    slug_source,
    worktree_of,
)
from support.model_server import ModelServer, RecordedRequest, Turn, Usage
from support.repo import FIXED, git, make_repo

pytestmark = pytest.mark.interop
MODEL = "claude-sonnet-4-5"
CWD = r"Primary working directory: (\S+)"


@pytest.fixture
def server() -> Iterator[ModelServer]:
    require("claude")
    with ModelServer() as started:
        yield started


def claude_run(tmp_path: Path, server: ModelServer, **coder: object) -> AgentRun:
    env = {
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": "sk-ant-any",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
    }
    return AgentRun(
        make_repo(tmp_path),
        tmp_path / "home",
        {"kind": "claude", "model": MODEL, **coder},
        env,
    )


def read(request: RecordedRequest) -> Turn:
    return Turn.call("Read", {"file_path": str(worktree_of(request, CWD) / "src" / "slug.py")})


def edit(request: RecordedRequest) -> Turn:
    path = worktree_of(request, CWD) / "src" / "slug.py"
    change = {"file_path": str(path), "old_string": BUGGY_LINE, "new_string": FIXED_LINE}
    return Turn.call("Edit", change, usage=Usage(1500, 80))


def test_claude_fixes_the_bug_with_read_and_edit_and_reports_its_usage(
    tmp_path: Path, server: ModelServer
) -> None:
    server.script(read, edit, Turn.reply("Slugify now keeps digits.", usage=Usage(2000, 30)))
    run = claude_run(tmp_path, server, max_turns=10)
    outcome = run.run()
    assert_merged(outcome, run.repo)
    payload = outcome.payload
    assert payload["coder_report"]["summary"] == "Slugify now keeps digits."
    assert payload["coder_report"]["turns_used"] == 3
    # Usage and cost as Claude Code's own result event reported them.
    assert payload["usage"]["tokens"] == 100 + 20 + 1500 + 80 + 2000 + 30
    assert payload["usage"]["cost_usd"] > 0
    first, *_ = server.completions
    assert first.path == "/v1/messages" and first.body["stream"] is True
    assert first.body["model"] == MODEL
    assert first.headers["x-api-key"] == "sk-ant-any"
    assert {"Read", "Edit", "Write", "Bash"} <= {t["name"] for t in first.body["tools"]}
    assert "Make slugify keep digits" in first.raw.decode()
    # The tool result Claude Code sent back: its Edit tool changed the file.
    assert "has been updated successfully" in server.completions[-1].raw.decode()


def test_claude_stopped_by_max_turns_is_a_turn_budget_stop(
    tmp_path: Path, server: ModelServer
) -> None:
    listing = Turn.call("Bash", {"command": "ls src", "description": "List the sources"})
    server.script(*[listing] * 5)
    outcome = claude_run(tmp_path, server, max_turns=2).run()
    assert_turn_budget(outcome)
    assert len(server.completions) == 2
    assert "slug.py" in server.completions[-1].raw.decode()  # the Bash tool really ran


def test_claude_rate_limited_is_lost_to_quota_and_refunded(tmp_path: Path) -> None:
    require("claude")
    with ModelServer(when_exhausted=Turn.rate_limited(retry_after=30, reset="30s")) as server:
        run = claude_run(tmp_path, server)
        outcome = run.run()
    assert_refunded_quota(outcome)
    assert "rate limit" in outcome.payload["reason"].lower()
    assert len(server.completions) == 1  # CLAUDE_CODE_MAX_RETRIES=0: no retry
    assert slug_source(run.repo).endswith(BUGGY_LINE)


def test_claude_overloaded_is_a_provider_fault_not_a_quota(
    tmp_path: Path, server: ModelServer
) -> None:
    server.when_exhausted = Turn.overloaded()
    outcome = claude_run(tmp_path, server).run()
    assert outcome.seat["stop_reason"] == "provider_fault"
    assert outcome.seat["lost_to_quota"] is False
    # Lost to the provider, not failed: refunded, and the reason names the fault.
    assert outcome.seat["lost_to_provider_fault"] is True
    assert outcome.payload["attempt_spent"] is False
    assert outcome.payload["reason"].startswith("every seat lost to a provider fault: claude:")


def test_claude_prompt_too_long_is_a_context_budget_stop(
    tmp_path: Path, server: ModelServer
) -> None:
    server.script(Turn.context_exceeded())
    outcome = claude_run(tmp_path, server).run()
    assert outcome.seat["stop_reason"] == "context_budget"
    assert "halt-budget-exhausted" in [h["name"] for h in outcome.payload["halts"]["warnings"]]


# The brief, as Claude Code delivers it ------------------------------------------------------

CONTRADICTION = (
    "Make slugify drop every digit; tests/test_slug.py::test_digits (which asserts that digits "
    "are kept) must pass."
)
EVIDENCE = "the task says drop digits; tests/test_slug.py::test_digits asserts they are kept"
NO_BRIEF = "there is no brief in the system prompt"


def system_prompt(request: RecordedRequest) -> str:
    system = request.body.get("system") if isinstance(request.body, dict) else None
    if isinstance(system, str):
        return system
    blocks = system if isinstance(system, list) else []
    return "\n".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict))


def fire_from_brief(request: RecordedRequest) -> Turn:
    """Find the brief's command for halt-spec-contradiction and run it with Bash, as told."""
    line = re.search(
        r'^\s*(assay halt check .*--condition halt-spec-contradiction --fire --evidence )"[^"]*"$',
        system_prompt(request),
        re.MULTILINE,
    )
    if line is None:
        return Turn.reply(NO_BRIEF)
    command = f'{line.group(1)}"{EVIDENCE}"'
    return Turn.call("Bash", {"command": command, "description": "Fire the halt"})


def no_change_from_brief(request: RecordedRequest) -> Turn:
    """Answer with the no-op protocol the brief describes: its mark, then the evidence."""
    rule = re.search(r"start with `([^`]+)` followed by your evidence", system_prompt(request))
    if rule is None:
        return Turn.reply(NO_BRIEF)
    return Turn.reply(f"{rule.group(1)} tests/test_slug.py::test_digits passes at HEAD.")


def tool_results(request: RecordedRequest) -> list[str]:
    """The text of every tool result Claude Code sent back, in order."""
    texts: list[str] = []
    for message in request.messages:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                parts = inner if isinstance(inner, list) else [{"text": inner}]
                texts.append("".join(str(p.get("text", "")) for p in parts if isinstance(p, dict)))
    return texts


def skills_listed(request: RecordedRequest) -> bool:
    """Claude Code lists the skills it loaded for its Skill tool in the request."""
    tools = request.body.get("tools") if isinstance(request.body, dict) else None
    names = {t.get("name") for t in tools or [] if isinstance(t, dict)}
    return "Skill" in names and "- assay-halts: " in request.raw.decode()


def test_claude_fires_the_halt_the_brief_describes(tmp_path: Path, server: ModelServer) -> None:
    server.script(fire_from_brief, Turn.reply("Halted: the task contradicts its own test."))
    run = claude_run(tmp_path, server, max_turns=5)
    run.task = CONTRADICTION
    base = git(run.repo.root, "rev-parse", "main")
    outcome = run.run()
    first, second, *_ = server.completions
    assert "# The rules of this task (assay)" in system_prompt(first)
    assert skills_listed(first)  # seed 002's skill, from the private config dir
    # Bash really ran `assay halt check` (no permission prompt refused it): its JSON came back.
    # Claude Code shows it as "Exit code 1" and the JSON line the command printed.
    shown = tool_results(second)[-1]
    ran = json.loads(next(line for line in shown.splitlines() if line.startswith("{")))
    assert (ran["fired"], ran["condition"]) == (True, "halt-spec-contradiction"), shown
    assert outcome.code == 3, (outcome.stderr, outcome.payload["reason"])
    payload = outcome.payload
    fired = {h["name"]: h["detail"] for h in payload["halts"]["fired"]}
    assert fired == {"halt-spec-contradiction": EVIDENCE}
    # Claude Code's shell reached the engine's halt relay ($ASSAY_HALT_RELAY, through claude and
    # its sandbox): the halt command itself journaled the firing, not only the engine's read.
    with sqlite3.connect(run.repo.root / ".assay" / "assay.db") as db:
        rows = db.execute(
            "SELECT data FROM events WHERE kind = 'halt.fired' AND run_id = ?",
            (payload["run_id"],),
        ).fetchall()
    by = {(d["name"], d["by"]) for d in (json.loads(data) for (data,) in rows)}
    assert ("halt-spec-contradiction", "halt check") in by, by
    assert "halt relay" not in shown  # no warning that the relay could not be reached
    assert payload["task_status"] == "held" and outcome.task["status"] == "held"
    assert git(run.repo.root, "rev-parse", "main") == base
    assert slug_source(run.repo).endswith(BUGGY_LINE)


def test_claude_claims_a_verified_noop_as_the_brief_says(
    tmp_path: Path, server: ModelServer
) -> None:
    server.script(no_change_from_brief)
    run = claude_run(tmp_path, server, max_turns=5)
    (run.repo.root / "src" / "slug.py").write_text(FIXED)
    git(run.repo.root, "commit", "-qam", "slugify already keeps digits")
    base = git(run.repo.root, "rev-parse", "main")
    outcome = run.run()
    assert outcome.code == 3, (outcome.stderr, outcome.payload["reason"])
    payload = outcome.payload
    assert payload["status"] == "verified_noop", payload["reason"]
    assert payload["task_status"] == "held" and outcome.task["status"] == "held"
    # Claude Code wrote no report file: its final answer became the report's summary.
    summary = payload["coder_report"]["summary"]
    assert summary.startswith("NO CHANGE NEEDED: tests/test_slug.py::test_digits passes")
    assert git(run.repo.root, "rev-parse", "main") == base
