"""Redaction of detected values in the files, JSON documents and verdicts assay keeps."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from assay.adapters import redact
from assay.adapters.redact import Redactor, SecretRedaction, redactions
from assay.adapters.validators.base import DetectedSecret, ValidationOutcome
from assay.core.results import ValidatorResult
from assay.core.vocab import Severity

KEY = "AKIA" + "Q3EGT7Z2LMXW5RPN"
WORD = 'pa"ss\\' + "w0rd-quoted"  # a value JSON escapes
AWS = "[REDACTED:AWS Access Key]"


def _redactor() -> Redactor:
    return Redactor(redactions([("AWS Access Key", KEY), ("Secret Keyword", WORD)]))


def test_text_and_json_forms_are_replaced() -> None:
    r = _redactor()
    assert r.text(f"key={KEY}; again {KEY}") == f"key={AWS}; again {AWS}"
    logged = json.dumps({"cmd": f"echo {WORD}"})
    assert WORD not in json.loads(r.text(logged))["cmd"]
    assert json.loads(r.text(logged))["cmd"] == "echo [REDACTED:Secret Keyword]"


def test_json_data_keys_and_nested_values() -> None:
    data = {"a": [KEY, {"b": f"x {KEY}"}], KEY: 1, "n": 3, "none": None}
    assert _redactor().data(data) == {"a": [AWS, {"b": f"x {AWS}"}], AWS: 1, "n": 3, "none": None}


def test_short_values_are_not_redacted() -> None:
    assert not Redactor(redactions([("t", "ab")]))


def test_a_file_is_rewritten_atomically_keeping_its_mode(tmp_path: Path) -> None:
    log = tmp_path / "claude.log"
    log.write_text(f"start\n{KEY}\nend\n")
    log.chmod(0o640)
    inode = log.stat().st_ino
    assert _redactor().file(log)
    assert log.read_text() == f"start\n{AWS}\nend\n"
    assert log.stat().st_mode & 0o777 == 0o640
    assert log.stat().st_ino != inode  # a new file, renamed over the old one
    assert [p.name for p in tmp_path.iterdir()] == ["claude.log"]  # no temporary left


def test_a_file_without_a_value_is_left_alone(tmp_path: Path) -> None:
    log = tmp_path / "x.out"
    log.write_text("nothing here\n")
    inode = log.stat().st_ino
    assert not _redactor().file(log)
    assert log.stat().st_ino == inode


@pytest.mark.parametrize("offset", [0, 1, 5, 10, 19, 20])
def test_a_value_split_across_reads_is_still_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offset: int
) -> None:
    monkeypatch.setattr(redact, "CHUNK", 16)
    text = "y" * (32 - offset) + KEY + "z" * 7 + KEY + KEY + "tail"
    log = tmp_path / "big.log"
    log.write_text(text)
    assert _redactor().file(log)
    assert log.read_text() == text.replace(KEY, AWS)


def test_a_tree_is_walked_without_following_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text(KEY)
    seat = tmp_path / "seat-1"
    (seat / "validators").mkdir(parents=True)
    (seat / "claude.log").write_text(f"a {KEY}")
    (seat / "validators" / "validator-tests.log").write_text(KEY)
    (seat / "link.log").symlink_to(outside)
    (seat / "dirlink").symlink_to(tmp_path, target_is_directory=True)
    os.link(outside, seat / "hard.log")  # a hard link: rewritten, never through the other name
    changed, failed = _redactor().tree(seat)
    assert failed == []
    assert sorted(p.name for p in changed) == ["claude.log", "hard.log", "validator-tests.log"]
    assert outside.read_text() == KEY
    assert (seat / "hard.log").read_text() == AWS
    assert (seat / "link.log").is_symlink()


def test_secret_redaction_of_outcomes_and_folders(tmp_path: Path) -> None:
    found = ValidationOutcome(
        result=ValidatorResult(validator_id="secrets", severity=Severity.BLOCK),
        secrets=(DetectedSecret("AWS Access Key", KEY),),
    )
    judge = ValidationOutcome(
        result=ValidatorResult(
            validator_id="j", severity=Severity.BLOCK, justification=f"it adds {KEY}"
        ),
        evidence=f"quoted {KEY}",
    )
    assert KEY not in repr(found)
    seat_log = tmp_path / "attempt-1" / "seat-1" / "coder.log"
    seat_log.parent.mkdir(parents=True)
    seat_log.write_text(KEY)
    kept = tmp_path / "contract.json"
    kept.write_text(KEY)
    redaction = SecretRedaction()
    assert redaction.outcomes([judge]) == [judge]  # nothing found yet: untouched
    assert redaction.absorb([found, judge]) and not redaction.absorb([found])
    assert redaction.redact_folders(tmp_path) == []
    assert seat_log.read_text() == AWS and kept.read_text() == KEY  # only the attempts' files
    _, clean = redaction.outcomes([found, judge])
    assert clean.result.justification == f"it adds {AWS}" and clean.evidence == f"quoted {AWS}"
