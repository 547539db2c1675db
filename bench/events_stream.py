"""How soon ``assay run --events jsonl`` says each event, and what the stream costs a run.

1. Lag: one instant run (``replay`` coder, ``true`` validator) with ``--events jsonl``; each
   stdout line is stamped when it arrives here, and its lag is arrival minus the event's own
   ledger time (``at``): the time from the ledger write to a reader holding the line.
   The median and the worst, over every event of every run.
2. Cost: the median wall time of the same run without ``--events``, and with it.

Usage: ``.venv/bin/python bench/events_stream.py [--runs 5] [--json]``. Machine-dependent:
read the two wall times side by side, not as absolutes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from _timing import INSTANT_CONTRACT, child_env  # noqa: E402
from support.repo import ASSAY, make_repo  # noqa: E402


def one_run(repo: Path, contract: Path, *extra: str) -> tuple[float, list[float]]:
    """(wall seconds, the lag of each event line in seconds)."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [str(ASSAY), "run", "--contract", str(contract), *extra],
        cwd=repo, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    lags = []
    for line in proc.stdout:
        arrived = time.time()
        if not extra:
            continue  # the human summary
        event = json.loads(line)
        if "kind" in event and "at" in event:
            lags.append(arrived - datetime.fromisoformat(event["at"]).timestamp())
    if proc.wait() != 0:
        raise SystemExit(f"assay run failed ({proc.returncode})")
    return time.monotonic() - started, lags


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="assay-bench-events-") as work:
        repo = make_repo(Path(work))
        contract = repo.contract("instant.yaml", INSTANT_CONTRACT)
        one_run(repo.root, contract)  # warm the bytecode and the page cache
        plain, streamed, lags = [], [], []
        for _ in range(args.runs):
            plain.append(one_run(repo.root, contract)[0])
            wall, seen = one_run(repo.root, contract, "--events", "jsonl")
            streamed.append(wall)
            lags += seen
    result = {
        "runs": args.runs,
        "events": len(lags),
        "lag_median_ms": round(statistics.median(lags) * 1000, 1),
        "lag_max_ms": round(max(lags) * 1000, 1),
        "wall_without_events_s": round(statistics.median(plain), 3),
        "wall_with_events_s": round(statistics.median(streamed), 3),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"{result['events']} events over {args.runs} runs")
    print(f"lag, ledger write to line read: median {result['lag_median_ms']} ms, "
          f"worst {result['lag_max_ms']} ms")  # fmt: skip
    print(f"run wall time: {result['wall_without_events_s']} s without --events, "
          f"{result['wall_with_events_s']} s with")  # fmt: skip


if __name__ == "__main__":
    main()
