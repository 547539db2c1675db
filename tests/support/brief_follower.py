"""A scripted model that follows the brief it finds in the request a real agent program sent.

The interop tests prove the brief reaches each program's model the way that program delivers
it (codex's AGENTS.md, aider's ``--read`` file, mini's system template): the scripted turns
below know nothing of assay's protocol. They read the halt command and the no-op mark out of
the request's own text, and answer with them; when the request carries no brief, they answer
with a plain "done" that changes nothing, so the test fails on the missing halt or no-op.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from support.agents import Outcome
from support.repo import FIXED, Repo, git, make_repo
from support.script import RecordedRequest, Turn

# The fire command as the brief prints it, evidence placeholder included.
_FIRE = re.compile(
    r'assay halt check --dispatch-id "\$ASSAY_DISPATCH_ID" --condition (?P<name>[a-z0-9-]+)'
    r' --fire --evidence "[^"\n]*"'
)
# "... start with `MARK` followed by your evidence": the brief's no-op protocol.
_NO_CHANGE = re.compile(r"with `(?P<mark>[A-Z][A-Z ]+:)` followed by your evidence")
NOT_BRIEFED = "done (the request carried no brief)"


def request_text(request: RecordedRequest) -> str:
    """Every string of the request, JSON escapes undone (a brief is sent inside JSON)."""
    body = request.body
    return "\n".join(_strings(body)) if body is not None else request.raw.decode(errors="replace")


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def fire_command(request: RecordedRequest, halt: str, evidence: str) -> str | None:
    """The brief's command that fires ``halt``, with ``evidence`` in place of the placeholder."""
    for match in _FIRE.finditer(request_text(request)):
        if match.group("name") == halt:
            head = match.group(0).rsplit(" --evidence ", 1)[0]
            return f"{head} --evidence {json.dumps(evidence)}"
    return None


def no_change_mark(request: RecordedRequest) -> str | None:
    match = _NO_CHANGE.search(request_text(request))
    return match.group("mark") if match else None


def fire_halt(
    halt: str, evidence: str, call: Callable[[str], Turn]
) -> Callable[[RecordedRequest], Turn]:
    """A script step: run the brief's fire command with the program's shell tool (``call``
    turns a command line into that program's tool call)."""

    def step(request: RecordedRequest) -> Turn:
        command = fire_command(request, halt, evidence)
        return call(command) if command else Turn.reply(NOT_BRIEFED)

    return step


def claim_no_change(evidence: str) -> Callable[[RecordedRequest], Turn]:
    """A script step: the final answer the brief asks for when nothing needs to change."""

    def step(request: RecordedRequest) -> Turn:
        mark = no_change_mark(request)
        return Turn.reply(f"{mark} {evidence}" if mark else NOT_BRIEFED)

    return step


def fixed_repo(tmp_path: Path) -> Repo:
    """The test repository with the bug already fixed at HEAD: nothing needs to change."""
    repo = make_repo(tmp_path)
    (repo.root / "src" / "slug.py").write_text(FIXED)
    git(repo.root, "commit", "-q", "-am", "slugify keeps digits")
    return repo


def head(repo: Repo) -> str:
    return git(repo.root, "rev-parse", "main")


def assert_halted(outcome: Outcome, repo: Repo, halt: str, base: str, evidence: str) -> None:
    """The agent fired ``halt``: exit 3, the task held, the base branch where it was."""
    payload = outcome.payload
    assert outcome.code == 3, (outcome.stderr, payload["reason"])
    assert payload["task_status"] == "held" and outcome.task["status"] == "held"
    fired = payload["halts"]["fired"]
    assert [h["name"] for h in fired] == [halt], payload["halts"]
    assert evidence in json.dumps(fired)
    assert head(repo) == base
    assert git(repo.root, "status", "--porcelain", "--untracked-files=no") == ""


def assert_verified_noop(outcome: Outcome, repo: Repo, base: str, evidence: str) -> None:
    """The agent said nothing needs to change, the validators agreed: held for a human."""
    payload = outcome.payload
    assert outcome.code == 3, (outcome.stderr, payload["reason"])
    assert (payload["status"], payload["task_status"]) == ("verified_noop", "held")
    assert outcome.task["status"] == "held"
    assert evidence in payload["reason"]
    assert payload["halts"]["fired"] == []
    assert head(repo) == base
