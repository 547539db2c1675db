"""A secret at the outer edge of a huge log's read is never kept in part, however much the
redaction of its earlier copies shortened the text before the cut."""

from __future__ import annotations

from pathlib import Path

from assay.adapters.log_shipping import read_log
from assay.adapters.redact import Redactor, redactions
from assay.core.run_logs import HEAD_BYTES, LOG_LIMIT

# A 64-character API key the run's scan found (its label "[REDACTED:API Key]" is 18).
SECRET = "sk-live-" + "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"[:56]
NAME = "attempt-1/seat-1/coder-attempt1.log"


def _redactor() -> Redactor:
    return Redactor(redactions({("API Key", SECRET)}))


def _margin(redactor: Redactor) -> int:
    return max(len(v.encode()) for v in redactor.table) + 4  # as read_log computes it


def _write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / NAME
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    return path


def test_a_secret_at_the_edge_of_the_head_read_is_never_kept_in_part(tmp_path: Path) -> None:
    redactor = _redactor()
    margin = _margin(redactor)
    edge = HEAD_BYTES + margin  # where the head's read ends
    line = f"Authorization: Bearer {SECRET}\n".encode()
    head = line * 5  # a client that logs its requests: 5 copies, each redacted (shorter)
    fragment = 40  # of the secret's 64 characters, inside the head's read
    pad = b"." * (edge - fragment - len(head))
    data = head + pad + SECRET.encode() + b"\n" + b"x" * (2 * LOG_LIMIT)
    assert data[edge - fragment : edge] == SECRET.encode()[:fragment]
    log = read_log(_write(tmp_path, data), NAME, redactor)
    assert log is not None and log.truncated
    assert SECRET[:24] not in log.text, "a part of the secret is kept (the head's read edge)"


def test_a_secret_at_the_edge_of_the_tail_read_is_never_kept_in_part(tmp_path: Path) -> None:
    redactor = _redactor()
    margin = _margin(redactor)
    line = f"Authorization: Bearer {SECRET}\n".encode()
    copies = line * 1000  # in the end: 46 bytes shorter each once redacted (~46 KiB in all)
    fragment = 40  # the secret's last 40 characters are inside the end's read
    end = SECRET.encode()[-fragment:] + b"\n" + copies
    end += b"y" * (LOG_LIMIT + margin - len(end))  # the end's read starts at the fragment
    data = b"h" * (3 * LOG_LIMIT) + SECRET.encode()[:-fragment] + end
    log = read_log(_write(tmp_path, data), NAME, redactor)
    assert log is not None and log.truncated
    assert SECRET[-24:] not in log.text, "a part of the secret is kept (the end's read edge)"
