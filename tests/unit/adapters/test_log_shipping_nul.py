"""A NUL byte in a program's output (a coder prints ``\\0``, a test dumps a binary blob)
loses no log of the run on PostgreSQL, whose ``text`` refuses NUL: it is kept as U+FFFD."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from support.postgres import postgres_url  # noqa: F401 (fixture)

from assay.adapters.log_shipping import LogShipper
from assay.adapters.store.sql import Ledger
from assay.core.tasks import Task

NOW = datetime(2026, 12, 6, tzinfo=UTC)


def _write(root: Path, name: str, data: bytes) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_a_nul_byte_in_one_log_loses_no_log_of_the_run(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    ledger = Ledger.open(postgres_url)
    task = Task.new(id="t1", title="t", instruction="i", now=NOW)
    ledger.add_task(task)
    task.start(NOW, run_id="r1")
    ledger.start_run(task, "r1", started_at=NOW)
    run = tmp_path / "runs" / "r1"
    _write(run, "attempt-1/seat-1/coder-attempt1.log", b"$ ./coder\nbinary: \x00\x01\x02 done\n")
    _write(run, "attempt-1/seat-1/validators/validator-tests.log", b"12 passed\n")
    shipper = LogShipper(ledger, {}, lambda: NOW)
    try:
        shipper.ship("r1", run)
    except Exception as exc:  # the executor turns this into a warning: every log is lost
        raise AssertionError(f"the ledger refused the run's logs: {exc}") from exc
    names = [e.name for e in ledger.run_logs("r1")]
    assert names == [
        "attempt-1/seat-1/coder-attempt1.log",
        "attempt-1/seat-1/validators/validator-tests.log",
    ]
    kept = ledger.run_log("r1", "attempt-1/seat-1/coder-attempt1.log")
    assert kept is not None and "done" in (kept.text or "")
