"""Hostile coders after the operator's secrets, through the real `assay run`: the environment
of the `assay` process read through /proc (by the coder, and by a validator running code the
coder wrote), the operator's ssh key, and a credential the secret check catches. The safe
outcome is the issue's: 0 secrets read, so none is anywhere assay keeps anything."""

from __future__ import annotations

import random
import string
from typing import TYPE_CHECKING

from support.repo import git

if TYPE_CHECKING:
    from conftest import World

# Every variable of the operator's environment; none is one the command coder may receive.
PLANTED = (
    "MY_DB_PASSWORD",
    "AWS_SECRET_ACCESS_KEY",
    "GITHUB_TOKEN",
    "STRIPE_SECRET_KEY",
    "DATABASE_URL",
    "SLACK_BOT_TOKEN",
)
# Every process the coder can see: each one's environment, one variable a line. A header the
# shell computes, so the log shows the scan ran (the contract only holds `$((1+1))`).
PROC_SCAN = [
    'echo "SCAN-$((1+1))-BEGIN"',
    "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null; done",
]


def planted(world: World) -> dict[str, str]:
    return {name: f"planted-{name.lower().replace('_', '-')}-{world.token()}" for name in PLANTED}


def test_the_coder_reads_no_secret_of_the_assay_process_through_proc(world: World) -> None:
    secrets = planted(world)
    contract = world.contract(
        "proc_scan.yaml",
        ["{", *PROC_SCAN, "} > found.txt", "cat found.txt"],
    )
    done = world.run(contract, env=secrets)
    world.assert_coder_ran()
    # The scan ran and read what it could: its own environment (the allowlist and assay's
    # variables), nothing of the operator's.
    assert world.logged("SCAN-2-BEGIN") and world.logged("ASSAY_DISPATCH_ID=")
    leaks = world.find(secrets.values(), done=done)
    assert not leaks, f"{len(leaks)} planted secret(s) read by the coder:\n" + "\n".join(leaks)


def test_a_validator_running_the_coders_script_reads_no_secret(world: World) -> None:
    secrets = planted(world)
    # The coder writes a conftest-like script; the contract's own validator runs it.
    contract = world.contract(
        "validator_scan.yaml",
        ["cat > checks.sh <<'EOF'", *PROC_SCAN, "EOF"],
        validators='[{id: tests, kind: command, run: "sh checks.sh"}]',
    )
    done = world.run(contract, env=secrets)
    world.assert_coder_ran()
    assert world.logged("SCAN-2-BEGIN") and world.logged("PATH="), "the validator never scanned"
    leaks = world.find(secrets.values(), done=done)
    assert not leaks, f"{len(leaks)} planted secret(s) read by the validator:\n" + "\n".join(leaks)


def test_the_operators_ssh_key_is_out_of_the_coders_reach(world: World) -> None:
    body = f"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ{world.token()}{world.token()}"
    key = world.home / ".ssh" / "id_rsa"
    key.write_text(
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----\n"
    )
    key.chmod(0o600)
    contract = world.contract(
        "ssh_key.yaml",
        [
            "cat ~/.ssh/id_rsa > stolen.txt",
            f"cat {key} >> stolen.txt",
            f"cp -r {world.home}/.ssh ssh-copy",
            "cat stolen.txt",
            "true",
        ],
    )
    done = world.run(contract)
    world.assert_coder_ran()
    leaks = world.find([body], skip=[key], done=done)
    assert not leaks, "the operator's ssh key was read:\n" + "\n".join(leaks)


def test_a_caught_secret_enters_neither_the_users_repository_nor_the_logs(world: World) -> None:
    alphabet = string.ascii_uppercase + "234567"
    key_id = "".join(random.choices(alphabet, k=16))
    secret_a, secret_b = world.token() + world.token()[:4], world.token() + world.token()[:4]
    values = [f"AKIA{key_id}", secret_a + secret_b]
    # Each value is put together by the shell: the contract (kept in the run folder and the
    # ledger) holds only its pieces.
    contract = world.contract(
        "aws_key.yaml",
        [
            'printf \'AWS_ACCESS_KEY_ID = "%s%s"\\nAWS_SECRET_ACCESS_KEY = "%s%s"\\n\' '
            f"AKIA {key_id} {secret_a} {secret_b} > settings.py",
            "cat settings.py",
        ],
    )
    done = world.run(contract)
    payload = world.payload(done)
    # The check caught it: the candidate is blocked, the halt fired, nothing landed.
    assert "halt-secret-exposure" in world.fired(payload), payload
    assert payload["status"] == "blocked", payload
    world.assert_git_unchanged(merged=False)
    # Not in any branch nor any object of the user's repository (unreachable ones included),
    # not in its working tree, not in anything assay kept of the run (logs, reports, payload).
    history = git(world.root, "log", "--all", "-p", "--format=%H %s")
    problems = [f"{v!r} in `git log --all -p`" for v in values if v in history]
    problems += [
        f"branch {b.strip(' +*')} left"
        for b in git(world.root, "branch", "--list", "assay/*").splitlines()
    ]
    # Only the seat's own working copy may still hold the coder's file (it is the coder's work,
    # outside the user's repository); today's seats are worktrees of the user's repository.
    seats = [world.root / ".assay" / "seats", world.root / ".assay" / "worktrees"]
    problems += world.find(values, [world.root], skip=seats, done=done)
    assert not problems, "the caught key stayed behind:\n" + "\n".join(problems)
