"""A run's logs read from its folder as the ledger keeps them: bounded, redacted, whole
characters only; shipped again only when they changed."""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.adapters.log_shipping import LogShipper, operator_secrets, read_log, read_run_logs
from assay.adapters.redact import Redactor, redactions
from assay.adapters.store.sql import Ledger
from assay.core.run_logs import HEAD_BYTES, LOG_LIMIT
from assay.core.tasks import Task
from assay.core.vocab import LogRole

NOW = datetime(2026, 12, 6, tzinfo=UTC)
KEY = "sk-live-0123456789abcdefXYZ"  # a secret a run's scan found
PASSWORD = "hunter2-but-longer"  # the ledger's password, the operator's own


def _redactor(*found: tuple[str, str]) -> Redactor:
    return Redactor(redactions(set(found)))


def _write(root: Path, name: str, data: bytes) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@settings(max_examples=40, deadline=None)
@given(
    middle=st.binary(max_size=64),
    pad=st.integers(min_value=0, max_value=3),
    size=st.sampled_from([10, LOG_LIMIT - 1, LOG_LIMIT + 5, 3 * LOG_LIMIT]),
)
def test_any_bytes_are_kept_as_valid_text_within_the_bound(
    middle: bytes, pad: int, size: int
) -> None:
    data = ("é" * (size // 2)).encode()[: size - pad] + middle + b"\xff" * pad + "end✓".encode()
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), "attempt-1/seat-1/x.log", data)
        log = read_log(path, "attempt-1/seat-1/x.log", _redactor())
    assert log is not None
    assert len(log.text.encode("utf-8")) <= LOG_LIMIT
    assert log.size == len(data) and log.truncated == (len(data) > LOG_LIMIT)
    assert log.text.endswith("end✓")
    assert log.text.startswith("é")


def test_a_huge_log_keeps_its_head_and_its_end_and_a_secret_across_a_cut_is_redacted_whole(
    tmp_path: Path,
) -> None:
    head = b"a" * (HEAD_BYTES - 5)  # the key straddles the head's cut
    middle = b"m" * (3 * LOG_LIMIT)
    tail_start = b"t" * 10  # the key straddles where the end's read begins
    data = head + KEY.encode() + middle + KEY.encode() + tail_start + b"x" * (LOG_LIMIT - 40)
    path = _write(tmp_path, "attempt-1/seat-1/coder-attempt1.log", data)
    log = read_log(path, "attempt-1/seat-1/coder-attempt1.log", _redactor(("API Key", KEY)))
    assert log is not None and log.truncated and log.size == len(data)
    assert len(log.text.encode()) <= LOG_LIMIT
    for part in (KEY[:6], KEY[-6:], "0123456789"):
        assert part not in log.text
    assert log.text.startswith("a" * 100) and log.text.endswith("x" * 100)
    assert "bytes cut …\n" in log.text
    assert (log.role, log.attempt, log.seat) == (LogRole.CODER, 1, 1)


def test_the_operator_s_secrets_and_credentials_are_never_kept(tmp_path: Path) -> None:
    env = {
        "ASSAY_DATABASE_URL": f"postgresql+psycopg://assay:{PASSWORD}@db/assay",
        "ASSAY_WEB_TOKEN": "web-token-0123456789",
        "ANTHROPIC_API_KEY": "sk-ant-abcdefghijklmnop",
        "PATH": "/usr/bin",
    }
    said = (
        f"connecting to db with {PASSWORD}\nAuthorization: Bearer web-token-0123456789\n"
        "key=sk-ant-abcdefghijklmnop\nPATH=/usr/bin\n"
    )
    _write(tmp_path, "attempt-1/seat-1/validators/validator-t.log", said.encode())
    (log,) = read_run_logs(tmp_path, Redactor(redactions(operator_secrets(env))))
    for value in (PASSWORD, "web-token-0123456789", "sk-ant-abcdefghijklmnop"):
        assert value not in log.text
    assert "[REDACTED:$ANTHROPIC_API_KEY]" in log.text and "PATH=/usr/bin" in log.text
    assert log.role is LogRole.VALIDATOR


def test_links_and_fifos_under_a_log_s_name_are_never_read(tmp_path: Path) -> None:
    secret = _write(tmp_path, "outside.txt", b"operator file")
    run = tmp_path / "run"
    (run / "attempt-1" / "seat-1").mkdir(parents=True)
    (run / "attempt-1/seat-1/a.log").symlink_to(secret)
    os.mkfifo(run / "attempt-1/seat-1/b.log")
    assert read_run_logs(run, _redactor()) == []


def _ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'assay.db'}")
    task = Task.new(id="t1", title="t", instruction="i", now=NOW)
    ledger.add_task(task)
    task.start(NOW, run_id="r1")
    ledger.start_run(task, "r1", started_at=NOW)
    return ledger


def test_a_shipper_writes_what_changed_and_a_found_secret_replaces_what_it_shipped(
    tmp_path: Path,
) -> None:
    ledger = _ledger(tmp_path)
    run = tmp_path / "runs" / "r1"
    coder = _write(run, "attempt-1/seat-1/coder-attempt1.log", f"printed {KEY}\n".encode())
    shipper = LogShipper(ledger, {}, lambda: NOW)
    assert shipper.ship("r1", run) == 1
    assert shipper.ship("r1", run) == 0  # nothing changed: nothing written
    _write(run, "attempt-1/seat-1/validators/validator-t.log", b"ok\n")
    assert shipper.ship("r1", run, {("API Key", KEY)}) == 2  # the new log, the redacted one
    kept = ledger.run_log("r1", "attempt-1/seat-1/coder-attempt1.log")
    assert kept is not None and kept.text == "printed [REDACTED:API Key]\n"
    assert kept.size == coder.stat().st_size
    assert [e.name for e in ledger.run_logs("r1")] == [
        "attempt-1/seat-1/coder-attempt1.log",
        "attempt-1/seat-1/validators/validator-t.log",
    ]


def test_a_shipper_reads_again_only_a_file_that_changed_or_a_new_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assay.adapters import log_shipping

    read: list[str] = []

    def counted(path: Path, name: str, redactor: Redactor) -> object:
        read.append(name)
        return read_log(path, name, redactor)

    monkeypatch.setattr(log_shipping, "read_log", counted)
    ledger = _ledger(tmp_path)
    run = tmp_path / "runs" / "r1"
    coder = _write(run, "attempt-1/seat-1/coder-attempt1.log", f"printed {KEY}\n".encode())
    _write(run, "attempt-1/seat-1/validators/validator-t.log", b"ok\n")
    shipper = LogShipper(ledger, {}, lambda: NOW)
    assert shipper.ship("r1", run) == 2
    assert len(read) == 2
    assert shipper.ship("r1", run) == 0
    assert len(read) == 2  # nothing changed: nothing read
    with coder.open("ab") as out:
        out.write(b"more\n")
    assert shipper.ship("r1", run) == 1
    assert read[2:] == ["attempt-1/seat-1/coder-attempt1.log"]
    assert shipper.ship("r1", run, {("API Key", KEY)}) == 1  # a new secret: all read again
    assert len(read) == 5
    kept = ledger.run_log("r1", "attempt-1/seat-1/coder-attempt1.log")
    assert kept is not None and kept.text == "printed [REDACTED:API Key]\nmore\n"
