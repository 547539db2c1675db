"""Paths through the real `assay run`: symlinks out of the seat and the default protection.

A ``command`` coder commits what a hostile agent would: a symlink to ``/etc/passwd``, one that
climbs out with ``../..``, a chain through another link, a workflow file under ``.github/``.
Each must be held as a scope breach (exit 3), never merged into the base branch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.repo import git, make_repo


def _run_command_coder(
    tmp_path: Path, command: str, scope: str = ""
) -> tuple[int, dict[str, Any], bool]:
    """(exit code, payload, whether the base branch stayed where it was)."""
    repo = make_repo(tmp_path)
    base = git(repo.root, "rev-parse", "main")
    text = (
        "task: Add a note.\n"
        f"coder: {{kind: command, command: {json.dumps(command)}}}\n"
        f"{scope}"
        "validators: [{id: ok, kind: command, run: 'true'}]\n"
        "land: merge\n"
    )
    done = repo.main("run", "--contract", str(repo.contract("c.yaml", text)), "--json")
    payload = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, payload, git(repo.root, "rev-parse", "main") == base


def _assert_held_for_scope(code: int, payload: dict[str, Any]) -> None:
    assert code == 3, payload
    assert payload["task_status"] == "held"
    assert [h["name"] for h in payload["halts"]["fired"]] == ["halt-scope-breach"]


@pytest.mark.parametrize(
    "command",
    [
        "ln -s /etc/passwd leak",
        "ln -s ../../.. up",
        "mkdir -p a/b && ln -s ../../.. a/b/up",
        # a chain: the new link is harmless by itself, the one it goes through climbs out
        "mkdir d && ln -s .. d/parent && ln -s d/parent/.. hop",
        # through a directory link: sub/here is the tree's root, so sub/here/.. is outside
        "mkdir sub && ln -s .. sub/here && ln -s sub/here/../etc escape",
    ],
    ids=["absolute", "climbs", "nested-climb", "chain", "through-a-directory-link"],
)
def test_a_symlink_out_of_the_tree_is_a_scope_breach(tmp_path: Path, command: str) -> None:
    code, payload, kept = _run_command_coder(tmp_path, command)
    _assert_held_for_scope(code, payload)
    assert kept, "the base branch must not move"
    evidence = payload["halts"]["fired"][0]["detail"]
    assert "symlink" in evidence, evidence


def test_a_symlink_to_a_file_inside_the_tree_still_merges(tmp_path: Path) -> None:
    code, payload, _ = _run_command_coder(
        tmp_path, "ln -s src/slug.py slug-link.py && mkdir -p docs && ln -s ../README.md docs/r"
    )
    assert code == 0, payload
    assert payload["status"] == "merged"


def test_a_workflow_file_is_protected_by_default(tmp_path: Path) -> None:
    code, payload, kept = _run_command_coder(
        tmp_path, "mkdir -p .github/workflows && echo 'on: push' > .github/workflows/ci.yml"
    )
    _assert_held_for_scope(code, payload)
    assert kept


def test_protect_can_be_emptied_explicitly(tmp_path: Path) -> None:
    code, payload, _ = _run_command_coder(
        tmp_path,
        "mkdir -p .github/workflows && echo 'on: push' > .github/workflows/ci.yml",
        scope="scope: {protect: []}\n",
    )
    assert code == 0, payload
    assert payload["status"] == "merged"


def test_a_run_without_a_contract_protects_github_too(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    base = git(repo.root, "rev-parse", "main")
    done = repo.main(
        "run",
        "Add CI.",
        "--coder-command",
        "mkdir -p .github/workflows && echo 'on: push' > .github/workflows/ci.yml",
        "--validator",
        "true",
        "--land",
        "merge",
        "--json",
    )
    _assert_held_for_scope(done.returncode, json.loads(done.stdout))
    assert git(repo.root, "rev-parse", "main") == base
