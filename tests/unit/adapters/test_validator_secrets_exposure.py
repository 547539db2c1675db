"""The secrets check judges exposure: a credential the base commit already holds, or its
``.secrets.baseline`` lists, or a line marked with the allowlist pragma is no finding; a new
provider credential blocks; a new generic one warns unless ``secrets: strict``.

Every case is a real git repository (the base commit, then the candidate's files) read back by
the engine's diff of two trees. Fake credentials are assembled at run time.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

import pytest
from support.repo import git
from support.seat_repo import candidate_change

from assay.adapters import git as assay_git
from assay.adapters.validators.base import ValidationContext, ValidationOutcome
from assay.adapters.validators.secret_exposure import parse_baseline
from assay.adapters.validators.secrets import SecretsValidator
from assay.core.vocab import CanonicalHalt, Severity

AWS_KEY = "AKIA" + "Z7QX4MB2LPWV9KDT"
OTHER_AWS_KEY = "AKIA" + "Q3EGT7Z2LMXW5RPN"
GITHUB_TOKEN = "ghp_" + "R8fT2kLw9QzX4vB7nM1cY6pD3sH5jA0eKu2G"
HEADER = "-----BEGIN RSA " + "PRIVATE KEY-----"
FOOTER = "-----END RSA " + "PRIVATE KEY-----"


def key_lines(count: int = 6) -> list[str]:
    return [base64.b64encode(os.urandom(48)).decode() for _ in range(count)]


def pem(lines: list[str]) -> str:
    return "\n".join([HEADER, *lines, FOOTER]) + "\n"


def check(
    tmp_path: Path,
    before: dict[str, str],
    after: dict[str, str],
    *,
    output: str = "",
    mode: str | None = None,
    env: dict[str, str] | None = None,
) -> ValidationOutcome:
    """The secrets check of the change from ``before`` (the base commit) to ``after``."""
    repo = tmp_path / "repo"
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    for name, text in {"README.md": "project\n", **before}.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    for name, text in after.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    settings = {"id": "secrets"} | ({"mode": mode} if mode else {})
    context = ValidationContext(
        worktree=repo,
        change=candidate_change(repo, base)[0],
        task="t",
        env=env or {},
        settings=settings,
        log_dir=tmp_path / "logs",
        captured_output=output,
    )
    return SecretsValidator().validate(context)


def values(outcome: ValidationOutcome) -> set[str]:
    return {s.value for s in outcome.secrets}


def assert_passes(outcome: ValidationOutcome) -> None:
    assert outcome.result.severity is Severity.PASS, outcome.result
    assert not outcome.result.error and outcome.fire is None
    assert outcome.result.findings == [] and outcome.secrets == ()


def assert_blocks(outcome: ValidationOutcome, *findings: str) -> None:
    assert outcome.result.severity is Severity.BLOCK, outcome.result
    assert outcome.fire is CanonicalHalt.SECRET_EXPOSURE
    assert not outcome.result.advisory
    for finding in findings:
        assert finding in outcome.result.findings, outcome.result.findings


# --- what the base commit holds is no exposure ---------------------------------------------------


def test_a_value_requoted_in_the_same_file_is_not_an_exposure(tmp_path: Path) -> None:
    before = "PARAMS = {\n    'secret': 'under',\n    'other_secret': 'makeshift',\n}\n"
    after = before.replace("'", '"')
    outcome = check(tmp_path, {"t.py": before}, {"t.py": after})
    assert_passes(outcome)
    assert "2 already in the base commit" in outcome.result.justification


def test_a_provider_key_the_base_holds_in_another_file_is_not_an_exposure(tmp_path: Path) -> None:
    base = {"tests/fixtures/creds.json": json.dumps({"aws": {"id": AWS_KEY}})}
    outcome = check(tmp_path, base, {"src/conf.py": f"KEY_ID = '{AWS_KEY}'\n"})
    assert_passes(outcome)


def test_a_new_provider_key_beside_an_old_one_blocks(tmp_path: Path) -> None:
    base = {"conf.py": f"OLD = '{AWS_KEY}'\n"}
    outcome = check(tmp_path, base, {"conf.py": f"OLD = '{AWS_KEY}'\nNEW = '{OTHER_AWS_KEY}'\n"})
    assert_blocks(outcome, "conf.py:2: AWS Access Key")
    assert outcome.result.findings == ["conf.py:2: AWS Access Key"]
    assert values(outcome) == {OTHER_AWS_KEY}  # the old one is not redacted: it is committed


def test_a_committed_private_key_copied_whole_is_not_an_exposure(tmp_path: Path) -> None:
    key = pem(key_lines())
    outcome = check(tmp_path, {"certs/ca.key": key}, {"deploy/copy.key": key})
    assert_passes(outcome)


def test_a_committed_key_with_one_new_line_is_a_new_key(tmp_path: Path) -> None:
    lines = key_lines()
    changed = [*lines[:3], key_lines(1)[0], *lines[4:]]
    outcome = check(tmp_path, {"certs/ca.key": pem(lines)}, {"deploy/new.key": pem(changed)})
    assert_blocks(outcome, "deploy/new.key:1: Private Key")


def test_a_regenerated_key_whose_header_line_stayed_is_a_new_key(tmp_path: Path) -> None:
    """urllib3's 322dba4205 regenerated its test keys: only the body lines changed, the
    ``-----BEGIN RSA PRIVATE KEY-----`` line is a context line of the diff."""
    old, new = key_lines(12), key_lines(16)
    outcome = check(tmp_path, {"certs/server.key": pem(old)}, {"certs/server.key": pem(new)})
    assert_blocks(outcome, "certs/server.key:1: Private Key")
    assert values(outcome) == set(new)


def test_a_key_changed_out_of_sight_of_its_header_is_a_new_key(tmp_path: Path) -> None:
    """The hunk starts inside the key: its header is read from the base, above the hunk."""
    lines = key_lines(30)
    changed = [*lines[:12], *key_lines(4), *lines[16:]]
    before = "# the server's test key\n" + pem(lines)
    after = "# the server's test key\n" + pem(changed)
    outcome = check(tmp_path, {"certs/server.key": before}, {"certs/server.key": after})
    assert_blocks(outcome, "certs/server.key:2: Private Key")
    assert set(changed[12:16]) <= values(outcome)


def test_a_key_whose_header_a_previous_hunk_shows_is_read_whole(tmp_path: Path) -> None:
    lines = key_lines(30)
    changed = [*lines[:20], key_lines(1)[0], *lines[21:]]
    before = "# header\n" + pem(lines)
    after = "# a new header\n" + pem(changed)
    outcome = check(tmp_path, {"certs/server.key": before}, {"certs/server.key": after})
    assert_blocks(outcome, "certs/server.key:2: Private Key")


def test_an_unchanged_key_beside_a_change_is_no_finding(tmp_path: Path) -> None:
    before = "# the test key\n" + pem(key_lines()) + "done\n"
    after = before.replace("# the test key", "# the test key (never use it)").replace(
        "done", "finished"
    )
    assert_passes(check(tmp_path, {"certs/ca.key": before}, {"certs/ca.key": after}))


def test_a_committed_key_moved_whole_into_another_file_is_no_finding(tmp_path: Path) -> None:
    key = pem(key_lines(8))
    outcome = check(
        tmp_path, {"a.key": key, "b.txt": "x\n"}, {"b.txt": "x\n" + key, "a.key": "gone\n"}
    )
    assert_passes(outcome)


def test_a_new_private_key_blocks_and_hands_over_its_lines(tmp_path: Path) -> None:
    lines = key_lines()
    outcome = check(tmp_path, {}, {"deploy/id_rsa": pem(lines)})
    assert_blocks(outcome, "deploy/id_rsa:1: Private Key")
    assert values(outcome) == set(lines)


def test_a_base_that_cannot_be_searched_holds_nothing(tmp_path: Path) -> None:
    from assay.adapters.validators.secret_exposure import values_in_base
    from assay.adapters.validators.secret_scan import Hit

    hit = Hit("c.py", 1, "AWS Access Key", "AWSKeyDetector", "h", frozenset({AWS_KEY}))
    assert values_in_base(tmp_path, "0" * 40, [hit]) == set()  # not a repository: fails closed


# --- the coder's output is judged the same way ----------------------------------------------------


def test_printing_the_head_of_a_committed_key_is_not_an_exposure(tmp_path: Path) -> None:
    lines = key_lines()
    # `head -3` of the key, then the rest of what the coder printed.
    output = "\n".join(["$ head -3 certs/ca.key", HEADER, *lines[:2], "updated README.md", "ok"])
    outcome = check(
        tmp_path, {"certs/ca.key": pem(lines)}, {"README.md": "project!\n"}, output=output
    )
    assert_passes(outcome)


def test_printing_a_committed_key_in_a_json_event_is_not_an_exposure(tmp_path: Path) -> None:
    lines = key_lines()
    shown = "\\n".join([HEADER, *lines[:2]]) + "\\n"
    output = '{"type":"tool_result","content":"' + shown + '","tool_use_id":"toolu_01A09q90qw9"}'
    outcome = check(tmp_path, {"certs/ca.key": pem(lines)}, {}, output=output)
    assert_passes(outcome)


def test_printing_a_new_key_blocks(tmp_path: Path) -> None:
    output = "\n".join(["generated:", pem(key_lines())])
    outcome = check(tmp_path, {"certs/ca.key": pem(key_lines())}, {}, output=output)
    assert_blocks(outcome, "coder output line 2: Private Key")


def test_printing_a_committed_token_passes_and_a_new_one_blocks(tmp_path: Path) -> None:
    base = {"tests/conftest.py": f'TOKEN = "{GITHUB_TOKEN}"\n'}
    assert_passes(check(tmp_path / "old", base, {}, output=f"token: {GITHUB_TOKEN}\n"))
    new = "ghp_" + "Z" * 4 + GITHUB_TOKEN[8:]
    outcome = check(tmp_path / "new", base, {}, output=f"token: {new}\n")
    assert_blocks(outcome, "coder output line 1: GitHub Token")
    assert values(outcome) == {new}


def test_the_value_of_a_credential_variable_blocks_even_among_old_values(tmp_path: Path) -> None:
    value = "qz" + "8Lr0vWm3Tn5Kp2Xa"
    outcome = check(tmp_path, {}, {}, output=f"using {value}\n", env={"PAYMENTS_TOKEN": value})
    assert_blocks(outcome, "coder output line 1: value of the variable PAYMENTS_TOKEN")
    assert {(s.type, s.value) for s in outcome.secrets} == {("PAYMENTS_TOKEN", value)}


# --- provider or generic -----------------------------------------------------------------------


NEW_VECTOR = '        ("http://user:pass%3Aword@complex.url.com/path", ("user", "pass:word")),\n'
VECTORS = '    (\n        ("http://user:pass@complex.url.com/path", ("user", "pass")),\n    )\n'


def test_a_generic_finding_warns_lists_its_finding_and_hands_over_its_value(
    tmp_path: Path,
) -> None:
    after = VECTORS.replace("    )\n", NEW_VECTOR + "    )\n")
    outcome = check(tmp_path, {"tests/test_utils.py": VECTORS}, {"tests/test_utils.py": after})
    result = outcome.result
    assert result.severity is Severity.WARN and result.advisory and not result.blocks
    assert outcome.fire is None
    assert result.findings == ["tests/test_utils.py:3: Basic Auth Credentials"]
    assert "secrets: strict" in result.justification
    assert values(outcome) == {"pass%3Aword"}  # redacted from the logs like an exposure
    assert "pass%3Aword" not in result.model_dump_json()


def test_strict_makes_a_generic_finding_block(tmp_path: Path) -> None:
    after = VECTORS.replace("    )\n", NEW_VECTOR + "    )\n")
    outcome = check(
        tmp_path, {"tests/test_utils.py": VECTORS}, {"tests/test_utils.py": after}, mode="strict"
    )
    assert_blocks(outcome, "tests/test_utils.py:3: Basic Auth Credentials")


def test_a_provider_exposure_and_a_generic_warning_together_block(tmp_path: Path) -> None:
    after = f'AWS_ID = "{AWS_KEY}"\ndb_password = "Tr0ub4dor-horse-staple"\n'
    outcome = check(tmp_path, {}, {"settings.py": after})
    assert_blocks(outcome, "settings.py:1: AWS Access Key", "settings.py:2: Secret Keyword")
    assert outcome.evidence is not None and "Secret Keyword" not in outcome.evidence
    assert "possible credential(s)" in outcome.result.justification


def test_lock_files_and_the_baseline_are_read_by_provider_detectors_only(tmp_path: Path) -> None:
    lock = '{"blob": "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5d2FsZG8="}\n'
    assert_passes(check(tmp_path / "hash", {}, {"package-lock.json": lock}))
    assert check(tmp_path / "data", {}, {"data.json": lock}).result.severity is Severity.WARN
    keyed = lock + f'{{"resolved": "https://x/{AWS_KEY}"}}\n'
    assert_blocks(check(tmp_path / "key", {}, {"package-lock.json": keyed}))


# --- the base commit's .secrets.baseline -------------------------------------------------------


def baseline(path: str, kind: str, value: str, line: int = 40) -> str:
    entry = {
        "type": kind,
        "filename": path,
        "hashed_secret": hashlib.sha1(value.encode()).hexdigest(),
    }
    return json.dumps({"version": "1.5.0", "results": {path: [dict(entry, line_number=line)]}})


def test_a_finding_the_base_baseline_lists_is_not_an_exposure(tmp_path: Path) -> None:
    listed = {".secrets.baseline": baseline("conf.py", "AWS Access Key", AWS_KEY)}
    outcome = check(tmp_path, listed, {"conf.py": f"KEY = '{AWS_KEY}'\n"})
    assert_passes(outcome)
    assert "1 listed in its .secrets.baseline" in outcome.result.justification


@pytest.mark.parametrize(
    ("path", "kind"), [("other.py", "AWS Access Key"), ("conf.py", "Secret Keyword")]
)
def test_the_baseline_matches_path_and_type_too(tmp_path: Path, path: str, kind: str) -> None:
    listed = {".secrets.baseline": baseline(path, kind, AWS_KEY)}
    assert_blocks(check(tmp_path, listed, {"conf.py": f"KEY = '{AWS_KEY}'\n"}))


def test_a_baseline_the_coder_writes_is_never_read(tmp_path: Path) -> None:
    written = {".secrets.baseline": baseline("conf.py", "AWS Access Key", AWS_KEY)}
    outcome = check(tmp_path, {}, {"conf.py": f"KEY = '{AWS_KEY}'\n", **written})
    assert_blocks(outcome, "conf.py:1: AWS Access Key")


def test_a_malformed_baseline_is_named_and_ignored(tmp_path: Path) -> None:
    outcome = check(tmp_path, {".secrets.baseline": "{not json"}, {"c.py": f"K = '{AWS_KEY}'\n"})
    assert_blocks(outcome)
    assert ".secrets.baseline is not detect-secrets' format" in outcome.result.justification


def test_parse_baseline_reads_detect_secrets_results() -> None:
    text = baseline("a/b.py", "Secret Keyword", "hunter22")
    digest = hashlib.sha1(b"hunter22").hexdigest()
    assert parse_baseline(text).entries == {("a/b.py", "Secret Keyword", digest)}
    assert parse_baseline(None).entries == frozenset()
    assert parse_baseline('{"results": []}').problem is not None


# --- the allowlist pragma, on added lines ------------------------------------------------------


def test_the_pragma_on_an_added_line_allows_a_generic_finding(tmp_path: Path) -> None:
    after = 'password = "hunter2-horse-battery"  # pragma: allowlist secret\n'
    assert_passes(check(tmp_path, {}, {"conf.py": after}))
    assert_passes(check(tmp_path / "strict", {}, {"conf.py": after}, mode="strict"))


def test_a_pragma_the_coder_wrote_beside_a_providers_key_warns_never_hides_it(
    tmp_path: Path,
) -> None:
    after = f"KEY = '{AWS_KEY}'  # pragma: allowlist secret\n"
    outcome = check(tmp_path, {}, {"conf.py": after})
    assert outcome.result.severity is Severity.WARN and outcome.fire is None
    assert outcome.result.findings == ["conf.py:1: AWS Access Key (allowlisted by a pragma)"]
    assert AWS_KEY in {s.value for s in outcome.secrets}  # still redacted from the logs
    assert_blocks(check(tmp_path / "strict", {}, {"conf.py": after}, mode="strict"))


def test_a_pragmad_key_the_base_already_holds_is_no_finding(tmp_path: Path) -> None:
    before = f"KEY = '{AWS_KEY}'  # pragma: allowlist secret\n"
    after = before + f"COPY = '{AWS_KEY}'  # pragma: allowlist secret\n"
    assert_passes(check(tmp_path, {"conf.py": before}, {"conf.py": after}))


def test_the_nextline_pragma_on_the_line_above_allows_the_next_only(tmp_path: Path) -> None:
    after = f"# pragma: allowlist nextline secret\nKEY = '{AWS_KEY}'\nNEW = '{OTHER_AWS_KEY}'\n"
    outcome = check(tmp_path, {}, {"conf.py": after})
    assert outcome.result.findings == [
        "conf.py:2: AWS Access Key (allowlisted by a pragma)",
        "conf.py:3: AWS Access Key",
    ]
    assert_blocks(outcome)


def test_the_nextline_pragma_may_be_an_unchanged_line(tmp_path: Path) -> None:
    before = "A = 1\n# pragma: allowlist nextline secret\nKEY = None\nB = 2\n"
    after = before.replace("KEY = None", f"KEY = '{AWS_KEY}'")
    outcome = check(tmp_path, {"conf.py": before}, {"conf.py": after})
    assert outcome.result.severity is Severity.WARN, outcome.result
    assert outcome.result.findings == ["conf.py:3: AWS Access Key (allowlisted by a pragma)"]
    generic = before.replace("KEY = None", 'password = "hunter2-horse-battery"')
    assert_passes(check(tmp_path / "g", {"conf.py": before}, {"conf.py": generic}))


def test_strings_at_finds_values_in_any_file_binary_ones_too(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.txt").write_text("prefix-LONGVALUE-suffix\n")
    (repo / "b.bin").write_bytes(b"\0\x01 BINVALUE99 \0")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "x")
    wanted = {"LONGVALUE", "GVAL", "BINVALUE99", "-suffix", "absent-value", ""}
    assert assay_git.strings_at(repo, "HEAD", wanted) == {
        "LONGVALUE",
        "GVAL",
        "BINVALUE99",
        "-suffix",
    }
