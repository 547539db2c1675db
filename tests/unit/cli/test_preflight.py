"""A new user's first `assay run` on a machine without the coder's program or key, as the real
process: exit 2 before anything is queued, one line per problem, no task left behind."""

from __future__ import annotations

import json
from pathlib import Path

from support.repo import make_repo


def test_a_missing_program_and_key_are_refused_and_nothing_is_queued(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    script = tmp_path / "newuser" / "fix.sh"  # in /tmp, as a new user keeps it
    script.parent.mkdir()
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    unset = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
    clouds = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX")
    env = {name: "" for name in (*unset, *clouds)}  # empty is unset, whatever the machine has
    env["PATH"] = f"{empty}:/usr/bin:/bin"
    no_claude = repo.main("run", "Fix add() so tests pass", "--coder", "claude", **env)
    assert no_claude.returncode == 2, no_claude.stderr
    assert no_claude.stdout == ""
    lines = no_claude.stderr.splitlines()
    assert len(lines) == 2
    assert lines[0] == (
        "assay: coder claude: claude not found on PATH: install it with "
        "`npm install -g @anthropic-ai/claude-code`"
    )
    assert lines[1].startswith("assay: coder claude: no API key: set ANTHROPIC_API_KEY")
    assert "/login" not in no_claude.stderr
    hidden = repo.main("run", "Fix add()", "--coder-command", str(script), **env)
    assert hidden.returncode == 2, hidden.stderr
    [line] = hidden.stderr.splitlines()
    assert "cannot be seen inside the sandbox: the sandbox has a private /tmp" in line
    assert "--sandbox none" in line
    assert not (repo.root / ".assay").exists()  # nothing written at all
    listed = repo.main("task", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []
