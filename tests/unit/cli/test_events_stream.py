"""``assay run|serve --events jsonl``: the ledger's events on stdout as they are written, each
exactly the object the dashboard's ``/events`` serves, and the command's result as the last
line with ``--json``; ``serve --json`` says what serve did. Run in-process; what needs a process
(lines read while the run goes on, a reader that leaves, a signal, a crash) is
tests/e2e/cli/test_events_stream_e2e.py."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from support.repo import Repo, make_repo, replay_contract

from assay.adapters.store.sql import Ledger
from assay.core.vocab import EventKind
from assay.web.live import message

EVENT_KEYS = {"id", "at", "kind", "task_id", "run_id", "data"}


def lines(stdout: str) -> list[dict[str, Any]]:
    assert stdout.endswith("\n"), stdout
    return [json.loads(line) for line in stdout.splitlines()]


def served_objects(repo: Repo, task_id: str) -> list[dict[str, Any]]:
    """The task's events as the dashboard's ``/events`` serves them (its SSE ``data:``)."""
    with Ledger.open(f"sqlite:///{repo.root / '.assay' / 'assay.db'}") as ledger:
        events = ledger.events(task_id)
    found = []
    for event in events:
        sse = message(event, named=False).splitlines()
        [data] = [line for line in sse if line.startswith("data: ")]
        found.append(json.loads(data.removeprefix("data: ")))
    return found


def check_events(events: list[dict[str, Any]]) -> None:
    ids = [e["id"] for e in events]
    assert ids == sorted(set(ids)), ids  # each once, in the ledger's order
    for event in events:
        assert set(event) == EVENT_KEYS, event
        assert event["kind"] in {k.value for k in EventKind}, event
        assert event["at"].endswith("+00:00"), event


def test_run_events_without_json_prints_nothing_but_events(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    done = repo.main("run", "--contract", str(replay_contract(repo, "fixed")), "--events", "jsonl")
    assert done.returncode == 0, done.stderr
    events = lines(done.stdout)
    check_events(events)
    assert events[-1]["kind"] == "run.closed"
    assert "payload: " in done.stderr and "merged into main" in done.stderr


def test_serve_streams_every_event_and_ends_with_its_summary(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = str(replay_contract(repo, "fixed", land="branch"))
    added = [repo.main("task", "add", "--contract", contract, "--json") for _ in range(2)]
    assert all(a.returncode == 0 for a in added), [a.stderr for a in added]
    done = repo.main(
        "serve", "--once", "--no-web", "--concurrency", "2", "--events", "jsonl", "--json"
    )
    assert done.returncode == 0, done.stderr
    *events, summary = lines(done.stdout)
    check_events(events)
    tasks = {e["task_id"] for e in events}
    assert len(tasks) == 2
    # Only what was written while serve ran: the tasks were added before it.
    assert "task.added" not in {e["kind"] for e in events}
    assert [e["kind"] for e in events].count("run.closed") == 2
    assert summary == {
        "runs": 2,
        "closed": {task: "done" for task in tasks},
        "interrupted": [],
        "skipped": [],
        "recovered": [],
        "stopped_by": None,
    }
    for task in tasks:
        served = [e for e in served_objects(repo, task) if e["kind"] != "task.added"]
        assert [e for e in events if e["task_id"] == task] == served


def test_events_are_refused_where_there_is_nothing_to_stream(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    done = repo.main("serve", "--web-only", "--events", "jsonl")
    assert done.returncode == 2 and "--web-only works no queue" in done.stderr, done.stderr
    done = repo.main("run", "x", "--events", "xml")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert not (repo.root / ".assay").exists()


def test_serve_json_lists_a_task_it_skipped_and_why(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = str(replay_contract(repo, "fixed", land="branch"))
    ids = []
    for _ in range(2):
        added = repo.main("task", "add", "--contract", contract, "--json")
        assert added.returncode == 0, added.stderr
        ids.append(json.loads(added.stdout)["id"])
    zombie, good = ids
    with sqlite3.connect(repo.root / ".assay" / "assay.db") as db:
        db.execute("UPDATE tasks SET status = 'zombie' WHERE id = ?", (zombie,))
    done = repo.main("serve", "--once", "--no-web", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["closed"] == {good: "done"} and summary["runs"] == 1, summary
    [skipped] = summary["skipped"]
    assert skipped["task_id"] == zombie and skipped["why"].startswith("unreadable: "), skipped
    assert f"skipping task {zombie}: unreadable" in done.stderr  # said as it happened too
