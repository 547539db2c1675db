"""How long parsing a hostile 1 MiB coder report takes (the limit the engine reads).

Each shape is 1 MiB of what a hostile coder could leave at ``$ASSAY_REPORT_PATH``: nesting as
deep as it goes, one huge string, many keys, a long file list, an unknown key after a valid
prefix. Each is parsed ``--runs`` times with ``read_coder_report`` (the same parse the engine
uses; it never raises). Prints the worst wall time per shape; the budget is 0.5 s.

    .venv/bin/python bench/report_parse.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import time

from assay.adapters.report_file import MAX_REPORT_BYTES
from assay.core.report import read_coder_report

BUDGET_SECONDS = 0.5


def shapes() -> dict[str, bytes]:
    size = MAX_REPORT_BYTES
    half = size // 2
    many_keys = "{" + ",".join(f'"k{i}":{i}' for i in range(size // 16)) + "}"
    files = [{"path": f"src/f{i}.py", "kind": "modified"} for i in range(size // 50)]
    return {
        "deep arrays": (b"[" * half + b"]" * half),
        "deep objects": (b'{"a":' * (size // 6) + b"1" + b"}" * (size // 6))[:size],
        "huge string": json.dumps({"summary": "x" * (size - 20)}).encode(),
        "huge escaped string": json.dumps({"summary": "\u2603" * (size // 7)}).encode(),
        "many keys": many_keys.encode(),
        "many files": json.dumps({"files": files}).encode(),
        "valid then unknown key": json.dumps(
            {"files": files[: len(files) // 2], "verdict": "pass"}
        ).encode(),
        "many bad files": json.dumps(
            {"files": [{"path": "a", "kind": "moved", "x": 1} for _ in range(size // 45)]}
        ).encode(),
        "huge integer": b'{"turns_used": ' + b"9" * (size - 20) + b"}",
        "invalid utf-8": b'{"summary": "' + b"\xff" * (size - 20) + b'"}',
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    worst_all = 0.0
    for name, raw in shapes().items():
        assert len(raw) <= MAX_REPORT_BYTES, (name, len(raw))
        worst = 0.0
        reason: str | None = None
        for _ in range(args.runs):
            start = time.perf_counter()
            _report, reason = read_coder_report(raw)
            worst = max(worst, time.perf_counter() - start)
        worst_all = max(worst_all, worst)
        kept = "discarded" if reason else "kept"
        print(f"{name:24} {len(raw):>8} bytes  worst {worst * 1000:7.1f} ms  ({kept})")
    verdict = "within" if worst_all < BUDGET_SECONDS else "OVER"
    print(f"worst {worst_all * 1000:.1f} ms, {verdict} the {BUDGET_SECONDS * 1000:.0f} ms budget")
    if worst_all >= BUDGET_SECONDS:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
