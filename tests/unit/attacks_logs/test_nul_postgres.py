"""Attack: a NUL byte in any program's output (a coder prints ``\\0``, a test prints a binary
blob) on a PostgreSQL ledger, whose ``text`` refuses NUL.

``read_log`` decodes with ``errors="replace"``, which keeps ``\\x00`` (valid UTF-8), and
nothing between it and ``INSERT`` strips it. PostgreSQL refuses the whole batch, so *every*
log of the run, shipped in the same batch, is lost, at every later ship too (the log is
shipped again each time, and refused again each time). Run with ``/tmp/e2e.sh`` (sets
``ASSAY_TEST_POSTGRES_URL``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from assay.adapters.log_shipping import LogShipper
from assay.adapters.store.sql import Ledger
from assay.core.tasks import Task
from support.postgres import postgres_url  # noqa: F401 (fixture)

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
