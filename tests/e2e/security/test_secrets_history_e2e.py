"""The secrets check on real history, through the real `assay run`: what real commits add is
judged as a reviewer would. An AWS SNS ARN (a real detect-secrets commit) is no Telegram token
and lands; a private key regenerated under its unchanged header line (urllib3's 322dba4205) is a
new key and is held; the operator's own inline coder script is not the coder's output, only
what the coder prints is."""

from __future__ import annotations

import base64
import os
import sys
from typing import TYPE_CHECKING

from support.repo import git

if TYPE_CHECKING:
    from conftest import World

SNS_ARN = "arn:aws:sns:us-east-1:123456789012:order-service-notifications-production"
HEADER = "-----BEGIN RSA " + "PRIVATE KEY-----"
FOOTER = "-----END RSA " + "PRIVATE KEY-----"


def commit_to_base(world: World, files: dict[str, str]) -> None:
    """``files`` committed on main before the run: the base the coder starts from."""
    for name, text in files.items():
        (world.root / name).parent.mkdir(parents=True, exist_ok=True)
        (world.root / name).write_text(text)
    git(world.root, "add", "-A")
    git(world.root, "commit", "-q", "-m", "the base")
    world.base = git(world.root, "rev-parse", "main")
    # The user's .git as it is now is what must not change (this folder's conftest, which
    # tests cannot import by name: the tests root has a conftest of its own).
    snapshot = sys.modules[type(world).__module__].git_dir_snapshot
    world.git_before = snapshot(world.root)


def secrets_result(payload: dict[str, object]) -> dict[str, object]:
    results = payload["validator_results"]
    assert isinstance(results, list)
    found = [r for r in results if r["validator_id"] == "secrets"]
    assert len(found) == 1, results
    result: dict[str, object] = found[0]
    return result


def test_a_commit_adding_an_sns_arn_lands(world: World) -> None:
    """The installed Telegram pattern found a "token" inside this ARN (the account id's last
    ten digits, then 35 characters of the topic name): the commit was held."""
    commit_to_base(world, {"tests/test_topics.py": "CASES = [\n]\n"})
    contract = world.contract(
        "arn.yaml",
        [
            "cat > tests/test_topics.py <<'EOF'",
            "CASES = [",
            f"    ('{SNS_ARN}', False),",
            "]",
            "EOF",
        ],
        land="merge",
    )
    done = world.run(contract)
    payload = world.payload(done)
    world.assert_coder_ran()
    assert done.returncode == 0, (payload.get("reason"), done.stderr[-2000:])
    assert payload["status"] == "merged", payload
    assert "halt-secret-exposure" not in world.fired(payload)
    assert secrets_result(payload)["severity"] == "pass"
    assert SNS_ARN in git(world.root, "show", "main:tests/test_topics.py")
    world.assert_git_unchanged(merged=True)


def test_a_private_key_regenerated_under_its_old_header_is_held(world: World) -> None:
    """Only the key's body lines change: its BEGIN line is a context line of the diff."""
    body = [base64.b64encode(os.urandom(48)).decode() for _ in range(12)]
    key = "\n".join([HEADER, *body, FOOTER]) + "\n"
    commit_to_base(world, {"dummyserver/certs/server.key": key})
    contract = world.contract(
        "regenerated.yaml",
        [
            "cd dummyserver/certs",
            "{ head -n 1 server.key",
            "  for n in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do",
            "    head -c 48 /dev/urandom | base64",
            "  done",
            "  tail -n 1 server.key; } > server.key.new",
            "mv server.key.new server.key",
        ],
        land="merge",
    )
    done = world.run(contract)
    payload = world.payload(done)
    world.assert_coder_ran()
    assert done.returncode == 3, (payload.get("reason"), done.stderr[-2000:])
    assert payload["task_status"] == "held", payload
    assert "halt-secret-exposure" in world.fired(payload)
    result = secrets_result(payload)
    assert result["severity"] == "block"
    assert result["findings"] == ["dummyserver/certs/server.key:1: Private Key"]
    world.assert_git_unchanged(merged=False)


def test_the_operators_inline_script_is_not_the_coders_output(world: World) -> None:
    """The contract's own script holds a token-looking string (a comment the operator wrote);
    assay scanned its command line as "coder output line 1" and held the task. Only what the
    coder prints is its output."""
    documented = "ghp_" + "R8fT2kLw9QzX4vB7nM1cY6pD3sH5jA0eKu2G"
    contract = world.contract(
        "inline.yaml",
        [
            f"# the docs' deploy token looks like {documented}: never print one",
            "echo 'a note' > NOTE.md",
            'echo "wrote NOTE.md ($((40+2)) bytes at most)"',
        ],
        land="merge",
    )
    done = world.run(contract)
    payload = world.payload(done)
    world.assert_coder_ran()
    assert done.returncode == 0, (payload.get("reason"), done.stderr[-2000:])
    assert payload["status"] == "merged", payload
    assert "halt-secret-exposure" not in world.fired(payload)
    result = secrets_result(payload)
    assert result["severity"] == "pass", result
    assert result["findings"] == []
    world.assert_git_unchanged(merged=True)
