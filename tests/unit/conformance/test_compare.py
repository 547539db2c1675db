"""The comparison itself: ids, times, commit ids and blind labels aside, every field counts."""

from __future__ import annotations

import copy
from typing import Any

from support.conformance import differences, normalise

COMMITS = {"r1": "ab12cd34ef56", "r2": "0f9e8d7c6b5a"}
TOOK = {"r1": "0.85", "r2": "1.2"}


def payload(run: str, labels: tuple[str, str], winner: str) -> dict[str, Any]:
    return {
        "task_id": "t1" if run == "r1" else "t2",
        "run_id": run,
        "dispatch_id": run,
        "status": "merged",
        "reason": f"merged into main as one commit, {COMMITS[run]}",
        "candidates": [
            {"seat": 1, "label": labels[0], "files_changed": ["src/slug.py"]},
            {"seat": 2, "label": labels[1], "files_changed": ["src/slug.py"]},
        ],
        "tally": {
            "winner": winner,
            "rankings": [[winner, "A" if winner == "B" else "B"]],
            "first_choices": {winner: 1, "A" if winner == "B" else "B": 0},
        },
        "land": {"mode": "merge", "branch": f"assay/{run}/seat-2"},
        "usage": {"tokens": 10, "wall_time_ms": 80 if run == "r1" else 1234},
        "started_at": f"2026-12-02T01:4{run[-1]}:19.577464Z",
        "finished_at": "2026-12-02T01:43:26Z",
        "halts": {"fired": [{"at": "2026-12-02T01:43:20+00:00", "detail": "x"}]},
        "validator_results": [{"justification": f"1 failed in {TOOK[run]}s"}],
    }


def test_ids_times_commits_and_labels_are_set_aside() -> None:
    # Seat 2 won both times, labelled B in one run and A in the other.
    left = normalise(payload("r1", ("A", "B"), "B"))
    right = normalise(payload("r2", ("B", "A"), "A"))
    assert differences(left, right) == []
    assert left["land"]["branch"] == "assay/<run_id>/seat-2"
    assert left["tally"]["winner"] == "<seat 2>"
    assert "run_id" not in left and "wall_time_ms" not in left["usage"]


def test_any_other_field_that_differs_is_named() -> None:
    base = payload("r1", ("A", "B"), "B")
    other = copy.deepcopy(base)
    other["usage"]["tokens"] = 11
    other["candidates"][0]["files_changed"].append("README.md")
    other["tally"]["winner"] = "A"  # seat 1 won instead
    found = differences(normalise(base), normalise(other))
    assert found == [
        "candidates[0].files_changed: 1 item(s) != 2: "
        "['src/slug.py'] != ['src/slug.py', 'README.md']",
        "tally.winner: '<seat 2>' != '<seat 1>'",
        "usage.tokens: 10 != 11",
    ]
    del other["status"]
    assert "status: only in left" in differences(normalise(base), normalise(other))
