"""What a live shipment of a running coder's log costs: one ``LogShipper.ship_live`` of a log
that grew since the last one (read its last 64 KiB, run the secret detectors over it, redact,
write it to the ledger), and one of a log that did not change (its file's stat only).
The executor ships each running seat's logs at most once per ``LIVE_EVERY`` seconds, so the
first figure over that interval is the share of one core a running seat's live log takes.

A ``--lines`` long log of stream-json-like lines (a model's transcript, the worst common
case: long lines, many keywords), on a SQLite ledger in a temporary folder; medians over
``--repeat`` ships.

    .venv/bin/python bench/live_logs.py [--lines 2000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from assay.adapters.live_logs import LIVE_EVERY
from assay.adapters.log_shipping import LogShipper
from assay.adapters.store.sql import Ledger
from assay.core.tasks import Task

STREAM = "attempt-1/seat-1/claude.log.out"
LINE = (
    '{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Edit","input":'
    '{"file_path":"src/slug.py","old_string":"def slugify(text)","new_string":"def slugify('
    'text: str) -> str"}}]},"usage":{"input_tokens":1200,"output_tokens":80},"n":%d}\n'
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    now = datetime.now(UTC)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        ledger = Ledger.open(f"sqlite:///{root / 'assay.db'}")
        task = Task.new(id="t1", title="t", instruction="i", now=now)
        ledger.add_task(task)
        task.start(now, run_id="r1")
        ledger.start_run(task, "r1", started_at=now)
        run = root / "runs" / "r1"
        path = run / STREAM
        path.parent.mkdir(parents=True)
        path.write_text("".join(LINE % n for n in range(args.lines)))
        shipper = LogShipper(ledger, {}, lambda: now)
        shipper.ship_live("r1", run, set(), lambda log: True)  # warm-up: detect-secrets loaded
        grew, same = [], []
        for n in range(args.repeat):
            with path.open("a") as out:
                out.write(LINE % (args.lines + n))
            start = time.perf_counter()
            assert shipper.ship_live("r1", run, set(), lambda log: True) == 1
            grew.append(time.perf_counter() - start)
            start = time.perf_counter()
            assert shipper.ship_live("r1", run, set(), lambda log: True) == 0
            same.append(time.perf_counter() - start)
        ledger.close()
    grown = statistics.median(grew) * 1000
    print(f"log: {args.lines} lines ({len(LINE % 0) * args.lines / 1024:.0f} KiB), tail 64 KiB")
    print(f"ship_live, log grew:  median {grown:.1f} ms (a write)")
    print(
        f"ship_live, unchanged: median {statistics.median(same) * 1000:.1f} ms (not read, no write)"
    )
    print(
        f"share of one core per running seat at one ship per {LIVE_EVERY:.0f} s: "
        f"{grown / (LIVE_EVERY * 1000) * 100:.1f} %"
    )


if __name__ == "__main__":
    main()
