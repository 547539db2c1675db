"""A hostile coder rewriting git's own files, through the real `assay run`: the config and the
hooks of the repository its seat belongs to, found the way a coder would (`git config`,
`git rev-parse --git-common-dir`) and by the user's repository's absolute path. The operator's
later git commands must not run the coder's code nor commit as the coder's identity: the
user's `.git` ends byte-for-byte as it began (see `git_dir_snapshot` for the few files assay
itself writes there)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from support.repo import git

if TYPE_CHECKING:
    from conftest import World

HOOK = (
    'printf \'#!/bin/sh\\necho pwned\\n\' > "$common/hooks/{name}"; chmod +x "$common/hooks/{name}"'
)


def test_a_coder_cannot_change_the_users_git_config_or_hooks(world: World) -> None:
    contract = world.contract(
        "git_dir.yaml",
        [
            "echo note > NOTE.md",
            # The repository the seat belongs to, as the coder sees it.
            "git config user.name EVIL",
            "git config user.email evil@example.org",
            "git config core.hooksPath /tmp/evil",
            'common="$(git rev-parse --git-common-dir)"',
            'mkdir -p "$common/hooks"',
            HOOK.format(name="post-commit"),
            HOOK.format(name="pre-push"),
            'echo "[alias]" >> "$common/config"; echo "  st = !echo pwned" >> "$common/config"',
            # The user's repository by its path.
            f"git -C {world.root} config user.name EVIL",
            f"common={world.root}/.git",
            HOOK.format(name="pre-commit"),
            f"chmod +x {world.root}/.git/hooks/*.sample",
            f"echo '*.py -diff' > {world.root}/.git/info/attributes",
            "exit 0",
        ],
        validators='[{id: ok, kind: command, run: "true"}]',
        land="merge",
    )
    done = world.run(contract)
    world.assert_coder_ran()
    payload = world.payload(done)
    merged = payload["status"] == "merged"
    world.assert_git_unchanged(merged=merged)
    # What the operator's own git sees: the operator's identity, git's default hooks.
    local = git(world.root, "config", "--local", "--list").lower()
    assert "evil" not in local and "hookspath" not in local and "alias" not in local, local
    if merged:  # the landing commit is the operator's, not the coder's
        author = git(world.root, "log", "-1", "--format=%an <%ae>", "main")
        assert author == "Ada Operator <ada@example.org>"


@pytest.mark.parametrize("land", ["merge", "branch"])
def test_control_a_harmless_run_leaves_the_users_git_as_it_was(world: World, land: str) -> None:
    """The check above is not stricter than assay itself: a coder that only writes its note
    passes it, landed or left on a branch."""
    contract = world.contract("harmless.yaml", ["echo note > NOTE.md"], land=land)
    done = world.run(contract)
    payload = world.payload(done)
    assert done.returncode == 0, done.stderr
    assert payload["status"] == ("merged" if land == "merge" else "ready"), payload
    world.assert_git_unchanged(merged=land == "merge")
