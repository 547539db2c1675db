"""An operator's stop request in a run's folder: written whole, read back, and any file there
is a request even when it is not one assay wrote (its details then said as unknown)."""

from __future__ import annotations

from pathlib import Path

from assay.adapters.stop_request import (
    MAX_ASK_BYTES,
    STOP_FILE,
    StopAsk,
    asked,
    read_ask,
    send_ask,
    watching,
)

ASK = StopAsk(action="cancel", by="ada", via="web", reason="wrong branch")


def test_a_request_is_read_back_by_the_run_it_was_left_for(tmp_path: Path) -> None:
    mine, other = tmp_path / "r1", tmp_path / "r2"
    mine.mkdir()
    other.mkdir()
    assert asked() is None  # code of no run: never stopped this way
    with watching(mine):
        assert asked() is None
        send_ask(mine, ASK, wait=True)  # no groups recorded: nothing to end
        assert asked() == ASK
    with watching(other):
        assert asked() is None
    assert asked() is None


def test_a_file_assay_did_not_write_is_still_a_request(tmp_path: Path) -> None:
    unknown = StopAsk(action="hold", by="unknown", via="unknown", reason="stop requested")
    for content in (b"", b"not json", b"[1]", b'{"action": "delete", "by": 7}',
                    b"{" + b" " * MAX_ASK_BYTES + b"}"):  # fmt: skip
        (tmp_path / STOP_FILE).write_bytes(content)
        assert read_ask(tmp_path) == unknown, content
    (tmp_path / STOP_FILE).write_text('{"action": "cancel", "reason": "r"}')
    assert read_ask(tmp_path) == StopAsk("cancel", "unknown", "unknown", "r")
    (tmp_path / STOP_FILE).unlink()
    assert read_ask(tmp_path) is None
