"""The secret check judges exposure, not fixtures, through ``assay run`` (in-process).

The three false alarms found on real repositories are reproduced in fixture repositories built
like them (requests' URL test vectors, ansible's no_log fixtures, requests' committed test
keys), each edited by a ``command`` coder the way a real agent would; and the true positives
(a new AWS key pair, a new private key, a GitHub token in the diff or in the output, a key the
coder also wrote into ``.secrets.baseline``) still block.

Credentials are assembled at run time (here, or by the coder's shell from pieces), so neither
this file nor a contract holds one.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import string
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.in_process import run_assay
from support.repo import git

KEY_HEADER = "-----BEGIN " + "PRIVATE KEY-----"
KEY_FOOTER = "-----END " + "PRIVATE KEY-----"

# requests' tests/test_utils.py, the vectors of get_auth_from_url as they are upstream.
AUTH_VECTORS = """\
import pytest

from requests.utils import get_auth_from_url


@pytest.mark.parametrize(
    "url, auth",
    (
        ("http://user:pass@complex.url.com/path?query=yes", ("user", "pass")),
        (
            "http://user:pass%20pass@complex.url.com/path?query=yes",
            ("user", "pass pass"),
        ),
        ("http://user:pass pass@complex.url.com/path?query=yes", ("user", "pass pass")),
        (
            "http://user:pass%23pass@complex.url.com/path?query=yes",
            ("user", "pass#pass"),
        ),
        ("http://complex.url.com/path?query=yes", ("", "")),
    ),
)
def test_get_auth_from_url(url, auth):
    assert get_auth_from_url(url) == auth
"""
NEW_VECTOR = '("http://user:pass%3Aword@complex.url.com/path?query=yes", ("user", "pass:word")),'
ADD_VECTOR = (
    'sed -i \'s|^        ("http://complex.url.com/path?query=yes", ("", "")),|'
    f"        {NEW_VECTOR}\\n&|' tests/test_utils.py"
)

# ansible's test/units/module_utils/common/parameters/test_list_no_log_values.py, abridged.
NO_LOG_FIXTURE = """\
import pytest

from ansible.module_utils.common.parameters import _list_no_log_values


@pytest.fixture
def argument_spec():
    return {
        'secret': {'type': 'str', 'no_log': True},
        'other_secret': {'type': 'str', 'no_log': True},
    }


@pytest.fixture
def module_parameters():
    return {
        'secret': 'under',
        'other_secret': 'makeshift',
    }


def test_list_no_log_values(argument_spec, module_parameters):
    expected = set(('under', 'makeshift'))
    assert expected == _list_no_log_values(argument_spec, module_parameters)
"""
NO_LOG_PATH = "test/units/module_utils/common/parameters/test_list_no_log_values.py"
REQUOTE = (
    'sed -i "s/\'secret\': \'under\'/\\"secret\\": \\"under\\"/; '
    's/\'other_secret\': \'makeshift\'/\\"other_secret\\": \\"makeshift\\"/" ' + NO_LOG_PATH
)
CA_KEY = "tests/certs/expired/ca/ca-private.key"
README = "Requests\n========\n\nRequests is a simple, yet elegant, HTTP library.\n"
EDIT_README = "sed -i 's/simple, yet elegant/simple yet elegant/' README.md"


def fake_private_key(lines: int = 12) -> str:
    """A PEM block of random base64 lines: shaped like a key, new every time."""
    body = [base64.b64encode(os.urandom(48)).decode() for _ in range(lines)]
    return "\n".join([KEY_HEADER, *body, KEY_FOOTER]) + "\n"


def aws_key_id() -> str:
    return "AKIA" + "".join(random.choices(string.ascii_uppercase + "234567", k=16))


def make_project(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "project"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the project")
    return root


def run(
    root: Path, script: list[str], *, extra: str = "", task: str = "Edit the project."
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``assay run --contract … --json`` with a ``command`` coder running ``script``
    (one shell line each), a passing validator and ``land: merge``; its exit and payload."""
    body = "".join(f"    {line}\n" for line in script)
    contract = root.parent / "contract.yaml"
    contract.write_text(
        f"task: {task}\n"
        "coder:\n"
        "  kind: command\n"
        "  timeout_seconds: 60\n"
        "  command: |\n"
        f"{body}"
        'validators: [{id: ok, kind: command, run: "true"}]\n'
        "budgets: {max_attempts: 1, max_recovery: 0}\n"
        "land: merge\n"
        f"{extra}"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    done = run_assay(["run", "--contract", str(contract), "--json"], cwd=root, env=env)
    try:
        payload = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise AssertionError(
            f"no payload (exit {done.returncode}): {done.stderr[-3000:]}"
        ) from None
    return done, payload


def secrets_result(payload: dict[str, Any]) -> dict[str, Any]:
    results = [r for r in payload["validator_results"] if r["validator_id"] == "secrets"]
    assert len(results) == 1, payload["validator_results"]
    result: dict[str, Any] = results[0]
    return result


def fired(payload: dict[str, Any]) -> list[str]:
    return [h["name"] for h in payload["halts"]["fired"]]


def output_line(root: Path, payload: dict[str, Any], start: str) -> int:
    """The number of the first line of what the coder printed (its stdout, not the log, which
    starts with the command line) that starts with ``start``: where the scan should say it
    found the secret."""
    log = root / ".assay" / "runs" / payload["run_id"] / "attempt-1" / "seat-1"
    lines = (log / "coder-attempt1.log.out").read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if line.startswith(start))


def assert_merged(done: subprocess.CompletedProcess[str], payload: dict[str, Any]) -> None:
    assert done.returncode == 0, (payload.get("reason"), done.stderr[-2000:])
    assert payload["status"] == "merged", payload["reason"]
    assert "halt-secret-exposure" not in fired(payload)


def assert_held_for_a_secret(
    done: subprocess.CompletedProcess[str], payload: dict[str, Any], root: Path, base: str
) -> dict[str, Any]:
    assert done.returncode == 3, (payload.get("reason"), done.stderr[-2000:])
    assert payload["task_status"] == "held"
    assert "halt-secret-exposure" in fired(payload)
    assert git(root, "rev-parse", "main") == base, "a blocked candidate reached main"
    result = secrets_result(payload)
    assert result["severity"] == "block"
    return result


# --- the three false alarms ------------------------------------------------------------------


def test_a_new_url_vector_like_its_neighbours_merges_with_a_warning(tmp_path: Path) -> None:
    root = make_project(tmp_path, {"tests/test_utils.py": AUTH_VECTORS})
    done, payload = run(root, [ADD_VECTOR])
    assert_merged(done, payload)
    assert NEW_VECTOR in (root / "tests" / "test_utils.py").read_text()
    result = secrets_result(payload)
    assert result["severity"] == "warn"
    # The new vector, and the coder's own command (the first line of its log) that wrote it.
    assert "tests/test_utils.py:19: Basic Auth Credentials" in result["findings"]
    assert all(f.endswith(": Basic Auth Credentials") for f in result["findings"])
    assert "secrets: strict" in result["justification"]
    # A warning's value is redacted from the logs assay keeps, like an exposure's.
    attempt = root / ".assay" / "runs" / payload["run_id"] / "attempt-1"
    logs = [p for p in attempt.rglob("*") if p.is_file()]
    assert logs and not [p for p in logs if "pass%3Aword" in p.read_text(errors="replace")]
    assert (
        "[REDACTED:Basic Auth Credentials]"
        in (attempt / "seat-1" / "coder-attempt1.log").read_text()
    )


def test_secrets_strict_blocks_the_same_url_vector(tmp_path: Path) -> None:
    root = make_project(tmp_path, {"tests/test_utils.py": AUTH_VECTORS})
    base = git(root, "rev-parse", "main")
    done, payload = run(root, [ADD_VECTOR], extra="secrets: strict\n")
    result = assert_held_for_a_secret(done, payload, root, base)
    assert "tests/test_utils.py:19: Basic Auth Credentials" in result["findings"]


def test_fixture_values_only_requoted_are_not_an_exposure(tmp_path: Path) -> None:
    root = make_project(tmp_path, {NO_LOG_PATH: NO_LOG_FIXTURE})
    done, payload = run(root, [REQUOTE])
    assert_merged(done, payload)
    assert '"secret": "under"' in (root / NO_LOG_PATH).read_text()
    result = secrets_result(payload)
    assert result["severity"] == "pass", result
    assert "already in the base commit" in result["justification"]


def test_printing_a_key_the_repository_holds_is_not_an_exposure(tmp_path: Path) -> None:
    root = make_project(tmp_path, {"README.md": README, CA_KEY: fake_private_key()})
    done, payload = run(root, [f"head -3 {CA_KEY}", EDIT_README])
    assert_merged(done, payload)
    assert secrets_result(payload)["severity"] == "pass"
    logs = list((root / ".assay" / "runs" / payload["run_id"]).rglob("coder-attempt1.log"))
    assert logs and KEY_HEADER in logs[0].read_text(), "the coder did not print the key"


# --- true positives still block ----------------------------------------------------------------


def test_a_new_aws_key_pair_blocks(tmp_path: Path) -> None:
    root = make_project(tmp_path, {"README.md": README})
    base = git(root, "rev-parse", "main")
    key_id = aws_key_id()
    secret = base64.b64encode(os.urandom(30)).decode()
    write = (
        f'printf \'AWS_ACCESS_KEY_ID = "%s%s"\\nAWS_SECRET_ACCESS_KEY = "%s%s"\\n\' '
        f"{key_id[:8]} {key_id[8:]} {secret[:20]} {secret[20:]} > settings.py"
    )
    done, payload = run(root, [write])
    result = assert_held_for_a_secret(done, payload, root, base)
    assert "settings.py:1: AWS Access Key" in result["findings"]
    assert key_id not in json.dumps(payload) and secret not in json.dumps(payload)


def test_a_new_private_key_blocks_and_printing_it_too(tmp_path: Path) -> None:
    root = make_project(tmp_path, {"README.md": README, CA_KEY: fake_private_key()})
    base = git(root, "rev-parse", "main")
    script = [
        "{",
        f"  echo '{KEY_HEADER[:11]}''{KEY_HEADER[11:]}'",
        "  for n in 1 2 3 4; do head -c 48 /dev/urandom | base64; done",
        f"  echo '{KEY_FOOTER[:9]}''{KEY_FOOTER[9:]}'",
        "} > deploy.key",
        "cat deploy.key",
    ]
    done, payload = run(root, script)
    result = assert_held_for_a_secret(done, payload, root, base)
    printed = output_line(root, payload, KEY_HEADER)
    assert result["findings"] == [
        f"coder output line {printed}: Private Key",
        "deploy.key:1: Private Key",
    ]


@pytest.mark.parametrize("where", ["diff", "output"])
def test_a_new_github_token_blocks(tmp_path: Path, where: str) -> None:
    root = make_project(tmp_path, {"README.md": README})
    base = git(root, "rev-parse", "main")
    tail = "".join(random.choices(string.ascii_letters + string.digits, k=36))
    show = f"printf 'token = %s_%s\\n' ghp {tail}"
    script = [f"{show} >> README.md"] if where == "diff" else [show, EDIT_README]
    done, payload = run(root, script)
    result = assert_held_for_a_secret(done, payload, root, base)
    if where == "diff":
        assert result["findings"] == ["README.md:5: GitHub Token"]
    else:
        printed = output_line(root, payload, "token = ")
        assert result["findings"] == [f"coder output line {printed}: GitHub Token"]


def test_a_key_the_coder_also_adds_to_the_baseline_still_blocks(tmp_path: Path) -> None:
    baseline = {"version": "1.5.0", "plugins_used": [], "filters_used": [], "results": {}}
    root = make_project(
        tmp_path, {"README.md": README, ".secrets.baseline": json.dumps(baseline, indent=2)}
    )
    base = git(root, "rev-parse", "main")
    key_id = aws_key_id()
    digest = hashlib.sha1(key_id.encode()).hexdigest()
    entry = {"type": "AWS Access Key", "filename": "conf.py", "hashed_secret": digest}
    listed = dict(baseline, results={"conf.py": [dict(entry, is_verified=False, line_number=1)]})
    script = [
        f"printf 'KEY = \"%s%s\"\\n' {key_id[:8]} {key_id[8:]} > conf.py",
        "cat > .secrets.baseline <<'EOF'",
        *json.dumps(listed, indent=2).splitlines(),
        "EOF",
    ]
    done, payload = run(root, script)
    result = assert_held_for_a_secret(done, payload, root, base)
    assert result["findings"] == ["conf.py:1: AWS Access Key"]


def test_a_key_the_base_commits_baseline_lists_is_not_an_exposure(tmp_path: Path) -> None:
    key_id = aws_key_id()
    digest = hashlib.sha1(key_id.encode()).hexdigest()
    entry = {"type": "AWS Access Key", "filename": "conf.py", "hashed_secret": digest}
    baseline = {"version": "1.5.0", "results": {"conf.py": [dict(entry, line_number=40)]}}
    root = make_project(
        tmp_path, {"README.md": README, ".secrets.baseline": json.dumps(baseline, indent=2)}
    )
    done, payload = run(root, [f"printf 'KEY = \"%s%s\"\\n' {key_id[:8]} {key_id[8:]} > conf.py"])
    assert_merged(done, payload)
    assert ".secrets.baseline" in secrets_result(payload)["justification"]
