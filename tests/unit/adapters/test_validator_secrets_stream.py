"""The secret scan streams a huge change: the diff read line by line from ``diff_lines`` (never
held whole), in chunks of bounded size, long lines in overlapping windows, with the same
findings as the whole text gives.

Fake credentials are assembled at run time so that this file itself holds none.
"""

from __future__ import annotations

import base64
import os
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.adapters.validators import secret_reader
from assay.adapters.validators.base import ValidationContext, ValidationOutcome
from assay.adapters.validators.secrets import SecretsValidator
from assay.core.changes import ChangeSet
from assay.core.vocab import CanonicalHalt, Severity

AWS_KEY = "AKIA" + "Z7QX4MB2LPWV9KDT"
GITHUB_TOKEN = "ghp_" + "R8fT2kLw9QzX4vB7nM1cY6pD3sH5jA0eKu2G"
HEADER = "-----BEGIN RSA " + "PRIVATE KEY-----"
FOOTER = "-----END RSA " + "PRIVATE KEY-----"


def added_file(path: str, lines: list[str]) -> list[str]:
    """The lines of the diff git prints for a new file holding ``lines``."""
    head = [f"diff --git a/{path} b/{path}", "new file mode 100644", "--- /dev/null"]
    head += [f"+++ b/{path}", f"@@ -0,0 +1,{len(lines)} @@"]
    return [*head, *(f"+{line}" for line in lines)]


def validate(
    tmp_path: Path, *, diff: str = "", streamed: list[str] | None = None
) -> tuple[ValidationOutcome, list[int]]:
    """The secrets check of ``diff`` (the whole text) or of ``streamed`` (given line by line,
    each with its newline), and how many times the stream was opened."""
    opened: list[int] = []

    def lines() -> Iterator[str]:
        opened.append(1)
        for line in streamed or []:
            yield line + "\n"

    context = ValidationContext(
        worktree=tmp_path,
        change=ChangeSet(base_commit="0" * 40, diff=diff),
        task="t",
        env={},
        settings={"id": "secrets"},
        log_dir=tmp_path / "logs",
        diff_lines=lines if streamed is not None else None,
    )
    return SecretsValidator().validate(context), opened


def filler(count: int) -> list[str]:
    return [
        f"row {n:07d} of a generated data file, value {n * 7919 % 100003}" for n in range(count)
    ]


def test_the_streamed_diff_is_scanned_instead_of_the_whole_text(tmp_path: Path) -> None:
    streamed = added_file("conf.py", ["DEBUG = False", f'AWS_ID = "{AWS_KEY}"'])
    outcome, opened = validate(tmp_path, diff="", streamed=streamed)
    assert opened == [1]
    assert outcome.fire is CanonicalHalt.SECRET_EXPOSURE
    assert outcome.result.findings == ["conf.py:2: AWS Access Key"]


def test_a_huge_stream_is_read_in_bounded_memory_with_the_findings_of_the_whole_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(secret_reader, "CHUNK_LINES", 2_000)
    monkeypatch.setattr(secret_reader, "CHUNK_CHARS", 256 << 10)
    lines = filler(150_000)
    body = [base64.b64encode(os.urandom(48)).decode() for _ in range(8)]
    lines[1_999] = f"see {GITHUB_TOKEN}"  # the last line of the first chunk
    lines[2_000:2_010] = [HEADER, *body, FOOTER]  # its key's body in the next chunk
    lines[149_999] = f"id: {AWS_KEY}"
    streamed = added_file("data/big.txt", lines)
    size = sum(len(line) + 1 for line in streamed)
    tracemalloc.start()
    try:
        outcome, _ = validate(tmp_path, streamed=streamed)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    expected = [
        "data/big.txt:2000: GitHub Token",
        "data/big.txt:2001: Private Key",
        "data/big.txt:150000: AWS Access Key",
    ]
    assert outcome.result.findings == expected
    assert set(body) <= {s.value for s in outcome.secrets}  # the key's whole body, across chunks
    assert peak < size / 4, f"{peak} bytes at the peak for a {size}-byte diff"
    whole, _ = validate(tmp_path, diff="\n".join(streamed) + "\n")
    assert whole.result.findings == expected


def test_a_secret_anywhere_in_a_very_long_line_is_found_once(tmp_path: Path) -> None:
    width = secret_reader.MAX_LINE_CHARS - secret_reader.WINDOW_OVERLAP
    minified = ["x=1;"] * 250_000  # one line of a million characters
    line = "".join(minified)
    # One token across the first windows' seam, one in the overlap of two windows, one at the end.
    at_seam = width - 10
    in_overlap = 2 * width + 100
    line = (
        line[:at_seam]
        + f"t={GITHUB_TOKEN};"
        + line[at_seam : in_overlap - len(GITHUB_TOKEN)]
        + f'"{AWS_KEY}"'
        + line[in_overlap:]
        + f";k='{AWS_KEY[:-2]}ZZ'"
    )
    outcome, _ = validate(tmp_path, streamed=added_file("dist/app.min.js", [line]))
    assert outcome.result.findings == [
        "dist/app.min.js:1: AWS Access Key",
        "dist/app.min.js:1: GitHub Token",
    ]
    assert {s.value for s in outcome.secrets} == {GITHUB_TOKEN, AWS_KEY, AWS_KEY[:-2] + "ZZ"}


def test_a_long_line_without_a_secret_says_it_was_read_in_windows(tmp_path: Path) -> None:
    line = "a" * (3 * secret_reader.MAX_LINE_CHARS)
    outcome, _ = validate(tmp_path, streamed=added_file("blob.txt", [line, "short"]))
    assert outcome.result.severity is Severity.PASS
    assert "2 added line(s)" in outcome.result.justification
    assert "1 line(s) longer than 16384 characters" in outcome.result.justification


def test_a_stream_that_fails_is_no_verdict_never_a_pass(tmp_path: Path) -> None:
    def broken() -> Iterator[str]:
        yield from added_file("a.py", ["x = 1"])[:3]
        raise OSError("git diff died")

    context = ValidationContext(
        worktree=tmp_path,
        change=ChangeSet(base_commit="0" * 40),
        task="t",
        env={},
        settings={"id": "secrets"},
        log_dir=tmp_path / "logs",
        diff_lines=broken,
    )
    outcome = SecretsValidator().validate(context)
    assert outcome.result.error and outcome.result.severity is Severity.BLOCK
    assert "OSError" in outcome.result.justification


def test_the_generic_detectors_stop_at_their_budget_and_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(secret_reader, "GENERIC_BUDGET", 200)
    lines = [f'db_password_{n} = "hunter{n}-horse-battery-staple"' for n in range(40)]
    lines.append(f"id: {AWS_KEY}")  # the providers' detectors read on
    outcome, _ = validate(tmp_path, streamed=added_file("settings.py", lines))
    assert outcome.fire is CanonicalHalt.SECRET_EXPOSURE
    assert "settings.py:41: AWS Access Key" in outcome.result.findings
    assert 0 < sum("Secret Keyword" in f for f in outcome.result.findings) < 40
    assert "the generic detectors stopped after 200 characters" in outcome.result.justification


def test_in_strict_mode_what_the_generic_detectors_did_not_read_is_no_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(secret_reader, "GENERIC_BUDGET", 10)
    lines = [f'password = settings.get("db-{n}")' for n in range(5)]  # over the budget
    context = ValidationContext(
        worktree=tmp_path,
        change=ChangeSet(base_commit="0" * 40, diff="\n".join(added_file("a.py", lines))),
        task="t",
        env={},
        settings={"id": "secrets", "mode": "strict"},
        log_dir=tmp_path / "logs",
    )
    outcome = SecretsValidator().validate(context)
    assert outcome.result.error and outcome.result.severity is Severity.BLOCK
    assert "could not judge the whole change" in outcome.result.justification


def test_past_the_most_findings_kept_the_scan_is_no_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(secret_reader, "MAX_HITS", 3)
    warnings = [f'db_password_{n} = "hunter{n}-horse-battery-staple"' for n in range(6)]
    outcome, _ = validate(tmp_path, streamed=added_file("settings.py", warnings))
    assert outcome.result.error and outcome.result.severity is Severity.BLOCK
    assert "more than 3 possible credentials" in outcome.result.justification
    keys = [f"id: AKIA{n:016d}" for n in range(6)]
    outcome, _ = validate(tmp_path, streamed=added_file("keys.txt", keys))
    assert outcome.fire is CanonicalHalt.SECRET_EXPOSURE  # what was kept already blocks
    assert len(outcome.result.findings) == 3
    assert "more than 3 possible credentials" in outcome.result.justification
