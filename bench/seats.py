"""Parallel seats: a 3-seat, 3-judge run with instant stand-ins beside a 1-seat run.

Both run the real ``assay run`` in a temporary repository: ``replay`` coders that change a
file at once, a ``true`` validator, and (for the 3-seat run) three blind LLM judges answered
at once by the scripted local model server. Prints the median wall time of each over N runs
and their ratio (goal: under 1.3x).

Usage: ``.venv/bin/python bench/seats.py [--runs 5] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from _timing import time_assay  # noqa: E402
from support.model_server import ModelServer  # noqa: E402
from support.repo import Repo, make_repo  # noqa: E402
from support.script import Turn  # noqa: E402


def contract(repo: Repo, seats: int, base_url: str) -> Path:
    coders = ", ".join(
        f'{{kind: replay, steps: [{{script: "echo seat{n} > src/out.txt"}}]}}'
        for n in range(1, seats + 1)
    )
    judges = (
        f"judges: 3\njudge: {{kind: llm, model: m, base_url: {base_url!r}}}\n" if seats > 1 else ""
    )
    return repo.contract(
        f"seats{seats}.yaml",
        f"""task: an instant task
seats: {seats}
coder: [{coders}]
{judges}validators: [{{id: ok, kind: command, run: "true"}}]
land: none
env: {{OPENAI_API_KEY: bench}}
""",
    )


def rank_first(_request: object) -> Turn:
    return Turn.call("rank", {"ranking": ["A", "B", "C"], "reasons": "instant"})


def timed(repo: Repo, path: Path, runs: int, server: ModelServer | None) -> list[float]:
    def script_judges() -> None:
        if server is not None:
            server.script(rank_first, rank_first, rank_first)

    return time_assay(
        repo, "run", "--contract", str(path), "--json", runs=runs, before=script_judges
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ModelServer() as server:
        repo = make_repo(Path(tmp))
        one = statistics.median(timed(repo, contract(repo, 1, server.base_url), args.runs, None))
        three = statistics.median(
            timed(repo, contract(repo, 3, server.base_url), args.runs, server)
        )
    figures = {
        "runs": args.runs,
        "one_seat_s": round(one, 3),
        "three_seats_three_judges_s": round(three, 3),
        "ratio": round(three / one, 2),
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(f"1 seat, no judges, median of {args.runs}:  {one:.3f} s")
    print(f"3 seats, 3 judges, median of {args.runs}:  {three:.3f} s")
    print(f"ratio: {three / one:.2f}x (goal < 1.3x)")


if __name__ == "__main__":
    main()
