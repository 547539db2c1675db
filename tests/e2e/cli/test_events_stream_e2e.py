"""``assay run|serve --events jsonl`` as a process: each line leaves while the run goes on, a
reader that leaves does not stop the run, ``serve --json`` names the signal that stopped it,
and ``run --resume`` streams what recovery wrote after a crash. The rest is
tests/unit/cli/test_events_stream.py."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from support.repo import ASSAY, Repo, make_repo, replay_contract

from assay.core.vocab import EventKind
from tests.unit.cli.test_events_stream import check_events, lines, served_objects


def waiting_coder(repo: Repo, go: Path) -> str:
    """A command coder that waits for ``go`` (outside any sandbox) and then fixes the bug."""
    wait = f"for i in $(seq 600); do [ -e {go} ] && break; sleep 0.1; done"
    return f"{wait}; {repo.put('fixed.py', 'src/slug.py')}"


def test_run_streams_each_event_as_it_is_written_and_prints_the_payload_last(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    go = tmp_path / "go"
    proc = subprocess.Popen(
        [
            str(ASSAY), "run", "Make slugify keep digits", "--coder", "command",
            "--coder-command", waiting_coder(repo, go), "--validator", "true",
            "--sandbox", "none", "--events", "jsonl", "--json",
        ],
        cwd=repo.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    early: list[dict[str, Any]] = []
    try:
        while not early or early[-1]["kind"] != EventKind.DISPATCH_STARTED:
            line = proc.stdout.readline()
            assert line, "the stream ended before the coder started"
            early.append(json.loads(line))
        # The coder is still waiting: these lines left while the run was going on.
        assert proc.poll() is None
        assert [e["kind"] for e in early][:3] == ["task.added", "run.opened", "run.started"]
    finally:
        go.touch()
    rest, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    *events, payload = early + lines(rest)
    check_events(events)
    assert events[-1]["kind"] == "run.closed"
    assert payload["schema"] == "assay.payload/1" and payload["status"] == "ready"
    task_id = payload["task_id"]
    assert {e["task_id"] for e in events} == {task_id}
    assert {e["run_id"] for e in events[1:]} == {payload["run_id"]}
    kinds = [e["kind"] for e in events]
    for kind in ("seat.finished", "validator.finished", "attempt.decided"):
        assert kind in kinds, kinds
    # Exactly what the dashboard's /events serves for the same events.
    assert events == served_objects(repo, task_id)
    # The human summary went to stderr; nothing there draws (stderr is no terminal).
    assert f"task {task_id}: done" in stderr and "\x1b" not in stderr


def test_a_reader_that_leaves_does_not_stop_the_run(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    proc = subprocess.Popen(
        [str(ASSAY), "run", "--contract", str(replay_contract(repo, "fixed")),
         "--events", "jsonl", "--json"],
        cwd=repo.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    assert json.loads(proc.stdout.readline())["kind"] == "task.added"
    proc.stdout.close()  # `assay run --events jsonl | head -1`
    stderr = proc.stderr.read()
    assert proc.wait(timeout=120) == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert [p["task_status"] for p in repo.payloads()] == ["done"]


def test_serve_json_alone_prints_the_summary_and_names_the_signal_that_stopped_it(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    proc = subprocess.Popen(
        [str(ASSAY), "serve", "--no-web", "--poll", "0.2", "--json"],
        cwd=repo.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not (repo.root / ".assay" / "assay.db").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.5)  # past the ledger's opening: serve is polling the queue
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert json.loads(stdout) == {
        "runs": 0,
        "closed": {},
        "interrupted": [],
        "skipped": [],
        "recovered": [],
        "stopped_by": "SIGINT",
    }


def test_resume_streams_what_recovery_wrote_then_the_run_again(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = str(replay_contract(repo, "fixed", land="branch"))
    crashed = repo.assay("run", "--contract", contract, ASSAY_CRASH_AT="dispatch_ended")
    assert crashed.returncode == 137, crashed.stderr
    done = repo.assay("run", "--resume", "--events", "jsonl", "--json")
    assert done.returncode == 0, done.stderr
    *events, payload = lines(done.stdout)
    check_events(events)
    kinds = [e["kind"] for e in events]
    assert kinds[:3] == ["run.interrupted", "run.closed", "run.opened"], kinds
    assert kinds[-1] == "run.closed" and payload["status"] == "ready"
    assert "recovered r" in done.stderr
