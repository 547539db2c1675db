"""The secrets check: detect-secrets over added lines and output; the value is never repeated.

Fake credentials are assembled at run time so that this file itself holds none.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from support.repo import git

from assay.adapters.validators import get_validator
from assay.adapters.validators.base import ValidationContext, ValidationOutcome
from assay.adapters.validators.secrets import SecretsValidator, added_lines
from assay.core.changes import ChangeSet
from assay.core.vocab import CanonicalHalt, Severity

AWS_KEY = "AKIA" + "Z7QX4MB2LPWV9KDT"
GITHUB_TOKEN = "ghp_" + "R8fT2kLw9QzX4vB7nM1cY6pD3sH5jA0eKu2G"
PRIVATE_KEY_HEADER = "-----BEGIN RSA " + "PRIVATE KEY-----"

NORMAL_CODE = '''\
"""Slugs for titles."""

import hashlib
import os
import re
import uuid

API_ROOT = "https://api.example.com/v2/items?page=2&per_page=50"
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
NAMESPACE = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
BASE_COMMIT = "f311314a9b2c3d4e5f60718293a4b5c6d7e8f901"
RESOLVER = "8.8.8.8"


def slugify(text: str) -> str:
    """Lower-case, keep letters and digits, join words with dashes."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def api_key() -> str:
    return os.environ["SERVICE_API_KEY"]


def login(user: str, password: str) -> dict[str, str]:
    token = os.environ.get("SESSION_TOKEN", "")
    digest = hashlib.sha256(password.encode()).hexdigest()
    return {"user": user, "password_digest": digest, "token": token}
'''

NORMAL_TEST = """\
import pytest

from slug import slugify


@pytest.mark.parametrize(
    ("title", "slug"),
    [("Hello World", "hello-world"), ("R2-D2 and C-3PO", "r2-d2-and-c-3po"), ("", "")],
)
def test_slugify(title: str, slug: str) -> None:
    assert slugify(title) == slug
"""

STREAM_OUTPUT = "\n".join(
    [
        '{"type":"system","subtype":"init","session_id":"9f3c1a2e-1b2c-4d5e-8f90-123456789abc"}',
        '{"type":"assistant","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","content":[]}}',
        '{"type":"user","message":{"content":[{"tool_use_id":"toolu_01A09q90qw90lq917835lq9"}]}}',
        "commit f311314a9b2c3d4e5f60718293a4b5c6d7e8f901",
        '{"type":"result","subtype":"success","total_cost_usd":0.0123,"num_turns":4}',
    ]
)


def _diff(tmp_path: Path, before: dict[str, str], after: dict[str, str]) -> str:
    """A real ``git diff`` from the ``before`` files to the ``after`` files."""
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    for path, text in before.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", "base")
    for path, text in after.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    return git(repo, "diff", "--cached", "HEAD", strip=False)


def _scan(
    tmp_path: Path, diff: str, output: str = "", env: dict[str, str] | None = None
) -> ValidationOutcome:
    context = ValidationContext(
        worktree=tmp_path,
        change=ChangeSet(base_commit="0" * 40, diff=diff),
        task="t",
        env=env or {},
        settings={},
        log_dir=tmp_path / "logs",
        captured_output=output,
    )
    return SecretsValidator().validate(context)


def _assert_value_absent(outcome: ValidationOutcome, value: str) -> None:
    assert value not in repr(outcome)
    assert value not in outcome.result.model_dump_json()
    assert value not in (outcome.evidence or "")


def test_a_normal_python_diff_and_agent_output_yield_no_finding(tmp_path: Path) -> None:
    diff = _diff(
        tmp_path,
        {"src/slug.py": "def slugify(text):\n    return text\n"},
        {"src/slug.py": NORMAL_CODE, "tests/test_slug.py": NORMAL_TEST},
    )
    outcome = _scan(tmp_path, diff, output=STREAM_OUTPUT)
    assert outcome.result.findings == []
    assert outcome.result.severity is Severity.PASS and not outcome.result.error
    assert outcome.fire is None


def test_an_added_key_blocks_and_fires_naming_file_line_and_type(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    logging.getLogger("detect-secrets").setLevel(logging.DEBUG)
    try:
        diff = _diff(
            tmp_path,
            {"src/settings.py": "DEBUG = False\nTIMEOUT = 3\n"},
            {"src/settings.py": f'DEBUG = False\nTIMEOUT = 3\nAWS_ACCESS_KEY_ID = "{AWS_KEY}"\n'},
        )
        outcome = _scan(tmp_path, diff)
    finally:
        logging.getLogger("detect-secrets").setLevel(logging.ERROR)
    assert outcome.result.severity is Severity.BLOCK and outcome.result.blocks
    assert outcome.fire is CanonicalHalt.SECRET_EXPOSURE
    assert outcome.result.findings == ["src/settings.py:3: AWS Access Key"]
    assert outcome.evidence is not None and "src/settings.py:3: AWS Access Key" in outcome.evidence
    assert "src/settings.py:3" in outcome.result.justification
    _assert_value_absent(outcome, AWS_KEY)
    assert AWS_KEY not in caplog.text
    for log_file in tmp_path.rglob("*.log*"):
        assert AWS_KEY not in log_file.read_text(errors="replace")


def test_a_secret_only_in_removed_lines_is_not_a_finding(tmp_path: Path) -> None:
    diff = _diff(tmp_path, {"conf.py": f'KEY = "{AWS_KEY}"\n'}, {"conf.py": "KEY = None\n"})
    assert _scan(tmp_path, diff).fire is None


def test_a_token_in_captured_output_blocks(tmp_path: Path) -> None:
    output = STREAM_OUTPUT + f"\n$ git push https://x:{GITHUB_TOKEN}@github.com/o/r\n"
    outcome = _scan(tmp_path, "", output=output)
    assert outcome.fire is CanonicalHalt.SECRET_EXPOSURE
    assert "coder output line 6: GitHub Token" in outcome.result.findings
    _assert_value_absent(outcome, GITHUB_TOKEN)


def test_a_private_key_in_a_new_file(tmp_path: Path) -> None:
    body = f"{PRIVATE_KEY_HEADER}\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n"
    diff = _diff(tmp_path, {}, {"deploy/id_rsa": body})
    outcome = _scan(tmp_path, diff)
    assert outcome.result.findings == ["deploy/id_rsa:1: Private Key"]


def test_the_value_of_a_credential_variable_in_the_env_is_found(tmp_path: Path) -> None:
    value = "qz" + "8Lr0vWm3Tn5Kp2Xa"
    diff = _diff(tmp_path, {"a.txt": "x\n"}, {"a.txt": f"x\nnote: {value}\n"})
    outcome = _scan(tmp_path, diff, env={"PAYMENTS_TOKEN": value, "HOME": "/root"})
    assert outcome.result.findings == ["a.txt:2: value of the variable PAYMENTS_TOKEN"]
    _assert_value_absent(outcome, value)


def test_line_numbers_follow_the_hunks(tmp_path: Path) -> None:
    before = "".join(f"line {i}\n" for i in range(1, 41))
    after = before.replace("line 5\n", "line 5\nnew a\n").replace(
        "line 30\n", f"line 30\ncreds = '{AWS_KEY}'\n"
    )
    diff = _diff(tmp_path, {"notes.txt": before}, {"notes.txt": after})
    assert added_lines(diff) == {"notes.txt": [(6, "new a"), (32, f"creds = '{AWS_KEY}'")]}
    assert _scan(tmp_path, diff).result.findings == ["notes.txt:32: AWS Access Key"]


def test_added_lines_that_look_like_headers_and_deletions() -> None:
    diff = "\n".join(
        [
            "diff --git a/x.md b/x.md",
            "--- a/x.md",
            "+++ b/x.md",
            "@@ -1,2 +1,3 @@",
            " keep",
            "-- old item",
            "+++ not a header",
            "+-- new item",
            "diff --git a/gone.txt b/gone.txt",
            "deleted file mode 100644",
            "--- a/gone.txt",
            "+++ /dev/null",
            "@@ -1 +0,0 @@",
            "-bye",
        ]
    )
    assert added_lines(diff) == {"x.md": [(2, "++ not a header"), (3, "-- new item")]}


def test_registry_returns_the_secrets_validator() -> None:
    assert isinstance(get_validator("secrets"), SecretsValidator)


# --- the values handed to the engine, for redaction only -------------------------------------


def _values(outcome: ValidationOutcome) -> set[tuple[str, str]]:
    return {(s.type, s.value) for s in outcome.secrets}


def test_the_whole_value_of_each_secret_is_handed_over_for_redaction(tmp_path: Path) -> None:
    diff = _diff(tmp_path, {}, {"conf.py": f'AWS = "{AWS_KEY}"\n'})
    output = f"$ git push https://x:{GITHUB_TOKEN}@github.com/o/r\n"
    outcome = _scan(tmp_path, diff, output=output)
    # detect-secrets captures only "ghp" of a GitHub token: the whole token must be redacted
    assert ("GitHub Token", GITHUB_TOKEN) in _values(outcome)
    assert ("AWS Access Key", AWS_KEY) in _values(outcome)
    _assert_value_absent(outcome, GITHUB_TOKEN)
    _assert_value_absent(outcome, AWS_KEY)


def test_a_private_key_hands_over_its_body_line_by_line(tmp_path: Path) -> None:
    lines = ["MIIEowIBAAKCAQEAw3nP0cG4kX2Hh0Zr1mB3o7cQd9sV", "Zp4xk1y9Vq3o2HtU8dLrFj5GmP7sNc0aBh=="]
    body = "\n".join([PRIVATE_KEY_HEADER, *lines, "-----END RSA PRIVATE KEY-----", "after"])
    diff = _diff(tmp_path, {}, {"deploy/id_rsa": body + "\n"})
    assert _values(_scan(tmp_path, diff)) == {("Private Key", v) for v in lines}
    # a JSON event stream holds the key on one line, its newlines escaped
    escaped = body.replace("\n", "\\n")
    output = '{"type":"tool_result","content":"' + escaped + '"}'
    assert _values(_scan(tmp_path, "", output=output)) >= {("Private Key", v) for v in lines}


def test_the_value_of_a_credential_variable_is_handed_over_by_name(tmp_path: Path) -> None:
    value = "qz" + "8Lr0vWm3Tn5Kp2Xa"
    outcome = _scan(tmp_path, "", output=f"token {value}\n", env={"PAYMENTS_TOKEN": value})
    assert _values(outcome) == {("PAYMENTS_TOKEN", value)}
    _assert_value_absent(outcome, value)


def test_a_clean_scan_hands_over_nothing(tmp_path: Path) -> None:
    assert _scan(tmp_path, "", output=STREAM_OUTPUT).secrets == ()


def test_a_putty_key_hands_over_its_lines() -> None:
    from assay.adapters.validators.secret_values import private_key_body

    lines = ["PuTTY-User-" + "Key-File-2: ssh-rsa", "Public-Lines: 1", "AAAAB3NzaC1yc2EAAAAB"]
    assert private_key_body(lines, 0) == {"AAAAB3NzaC1yc2EAAAAB"}


def _scan_worktree(
    tmp_path: Path, before: dict[str, bytes], after: dict[str, bytes]
) -> tuple[ValidationOutcome, ChangeSet]:
    """The secret scan of a real worktree's change from ``before`` (committed) to ``after``, and
    that change as the engine reads it (git decides what shows as binary)."""
    from support.seat_repo import candidate_change

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for name, data in {"README": b"base\n", **before}.items():
        (repo / name).write_bytes(data)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD").strip()
    for name, data in after.items():
        (repo / name).write_bytes(data)
    change, commit = candidate_change(repo, base)
    context = ValidationContext(
        worktree=repo,
        change=change,
        task="t",
        env={},
        settings={"id": "secrets"},
        log_dir=tmp_path / "logs",
        repo=repo,
        revision=commit,
    )
    return SecretsValidator().validate(context), change


@pytest.mark.parametrize(
    ("files", "path"),
    [
        ({".gitattributes": "*.txt -diff\n", "notes.txt": f"key = {AWS_KEY}\n"}, "notes.txt"),
        ({"blob.bin": f"\0\x01\x02 header\n{AWS_KEY} trailing\n"}, "blob.bin"),
    ],
    ids=["attributes-say-binary", "nul-byte"],
)
def test_a_secret_in_a_file_the_diff_shows_as_binary_still_blocks(
    tmp_path: Path, files: dict[str, str], path: str
) -> None:
    outcome, change = _scan_worktree(tmp_path, {}, {n: t.encode() for n, t in files.items()})
    # A NUL byte hides the lines from the diff; the candidate's own attributes no longer do
    # (the engine's diff of two trees reads no .gitattributes of the coder's).
    binary = f"Binary files /dev/null and b/{path} differ" in change.diff
    assert binary == (path == "blob.bin")
    assert outcome.fire is CanonicalHalt.SECRET_EXPOSURE, outcome.result
    assert any(path in finding for finding in outcome.result.findings)
    assert AWS_KEY not in outcome.result.justification


def test_a_binary_file_with_a_secret_already_in_the_base_is_not_a_new_finding(
    tmp_path: Path,
) -> None:
    old = f"\0 old {AWS_KEY} kept\n".encode()
    outcome, _ = _scan_worktree(
        tmp_path, {"blob.bin": old}, {"blob.bin": old + b"\0 new plain text\n"}
    )
    assert outcome.fire is None


def test_a_secret_in_a_text_file_with_an_image_extension_blocks(tmp_path: Path) -> None:
    # detect-secrets skips files by extension; an added text line is scanned whatever the name.
    diff = _diff(tmp_path, {}, {"logo.svg": f'<svg data="{AWS_KEY}"/>\n'})
    assert _scan(tmp_path, diff).fire is CanonicalHalt.SECRET_EXPOSURE
