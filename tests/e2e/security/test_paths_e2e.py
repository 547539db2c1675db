"""Hostile coders writing where their seat ends, through the real `assay run`: writes outside
the seat (up the tree, by absolute path, through a symlink they make), symlinks committed out
of the tree, and CI workflows no contract allowed. Outside the seat nothing appears; a
candidate that points out of the tree or touches `.github/` is a scope breach, never merged."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pytest
from support.repo import git

if TYPE_CHECKING:
    from conftest import World

# What the coder writes outside: computed by the shell, so the contract (kept by assay in the
# run folder) never holds it and every copy found was written by the coder.
MARK = 'M="OUTSIDE-$((6*7))-{tag}"'


def test_nothing_the_coder_writes_outside_its_seat_appears(world: World) -> None:
    tag = world.token()
    root, home, tmp = world.root, world.home, world.tmp
    tracked_before = {p: (root / p).read_bytes() for p in git(root, "ls-files").split()}
    contract = world.contract(
        "outside.yaml",
        [
            MARK.format(tag=tag),
            "echo ok > ok.txt",
            # Up the tree: the seat's run folder, .assay/, the user's working tree, above it.
            *(f'echo "$M" > {"../" * n}outside-{n}.txt' for n in range(1, 6)),
            # By absolute path: the user's working tree, the operator's home, the test folder.
            f'echo "$M" > {root}/planted.txt',
            f'echo "$M" >> {root}/src/slug.py',
            f'echo "$M" > {home}/evil.txt',
            f'echo "$M" >> {home}/.bashrc',
            f'mkdir -p {home}/.config/autostart && echo "$M" > {home}/.config/autostart/x',
            f'echo "$M" > {tmp}/abs-outside.txt',
            # Through a symlink the coder makes, then removes (so only the write is tested).
            *(
                f'ln -s {target} link-{i} && echo "$M" > link-{i}/via-link-{i}.txt; rm -f link-{i}'
                for i, target in enumerate([root, home, "../../../..", tmp, f"{root}/src"])
            ),
            "exit 0",
        ],
    )
    done = world.run(contract)
    world.assert_coder_ran()
    mark = f"OUTSIDE-42-{tag}"
    problems = world.find([mark], done=done)
    after = {p: (root / p).read_bytes() for p in git(root, "ls-files").split()}
    problems += [
        f"{p} changed in the user's working tree"
        for p in after
        if after[p] != tracked_before.get(p)
    ]
    problems += [f"{p} appeared" for p in ("planted.txt", "outside-4.txt") if (root / p).exists()]
    problems += [f"the operator's home changed: {c}" for c in world.home_changes()]
    assert not problems, "the coder wrote outside its seat:\n" + "\n".join(problems)
    world.assert_git_unchanged(merged=False)


def assert_breach_not_merged(world: World, payload: dict[str, Any], path: str) -> None:
    """The candidate is a scope breach: the halt fired, the task held, nothing merged."""
    assert world.fired(payload) == ["halt-scope-breach"], payload
    assert payload["status"] != "merged" and payload["task_status"] == "held", payload
    assert path not in git(world.root, "ls-tree", "-r", "--name-only", "main").split()
    assert not (world.root / path).is_symlink() and not (world.root / path).exists()
    world.assert_git_unchanged(merged=False)


@pytest.mark.parametrize(
    ("target", "name"),
    [("/etc/passwd", "leak"), ("../../..", "up"), ("../../../../etc", "src/etc")],
)
def test_a_committed_symlink_out_of_the_tree_is_a_scope_breach(
    world: World, target: str, name: str
) -> None:
    contract = world.contract(
        "symlink.yaml",
        ["echo note > NOTE.md", f"ln -s {target} {name}"],
        land="merge",
    )
    done = world.run(contract)
    world.assert_coder_ran()
    payload = world.payload(done)
    assert done.returncode == 3, f"exit {done.returncode}, {payload['status']}: {payload['reason']}"
    assert_breach_not_merged(world, payload, name)


def test_control_a_symlink_inside_the_tree_is_merged(world: World) -> None:
    """The breach above is the target's, not any symlink's: one within the tree lands."""
    contract = world.contract(
        "inner_symlink.yaml", ["ln -s slug.py src/alias.py", "ln -s src docs"], land="merge"
    )
    done = world.run(contract)
    payload = world.payload(done)
    assert done.returncode == 0, done.stderr
    assert payload["status"] == "merged" and world.fired(payload) == [], payload
    assert os.readlink(world.root / "src" / "alias.py") == "slug.py"
    world.assert_git_unchanged(merged=True)


def test_a_ci_workflow_the_contract_never_allowed_is_a_scope_breach(world: World) -> None:
    path = ".github/workflows/ci.yml"
    contract = world.contract(
        "workflow.yaml",
        [
            "mkdir -p .github/workflows",
            f"printf 'on: push\\njobs: {{x: {{runs-on: ubuntu-latest, steps: []}}}}\\n' > {path}",
        ],
        land="merge",
    )
    assert "scope" not in contract.read_text()  # no scope: the default protect must hold
    done = world.run(contract)
    world.assert_coder_ran()
    payload = world.payload(done)
    assert done.returncode == 3, f"exit {done.returncode}, {payload['status']}: {payload['reason']}"
    assert_breach_not_merged(world, payload, path)
