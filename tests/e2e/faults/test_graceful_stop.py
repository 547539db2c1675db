"""SIGINT and SIGTERM to `assay run` / `assay serve` while a coder works: the coder's process
group is stopped, the run closes as interrupted (refunded, with its payload and exact counts),
no seat is left, and the exit code is 130 / 143. The task `assay run` was running stays
stopped (held, its user stopped it; `assay task release` queues it again); the one `assay
serve` was running is runnable again (the queue stopped, not the task)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.repo import ASSAY, Repo, git, make_repo

from assay.adapters.store.sql import Ledger


def _start(repo: Repo, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    return subprocess.Popen(
        [str(ASSAY), *args],
        cwd=repo.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_coder(repo: Repo, proc: subprocess.Popen[str]) -> int:
    """The host process group of the sleeping coder, once it started.

    The coder runs in the seat's sandbox: it can write only its seat and its output folder
    (where it leaves ``started``), and its ``$$`` is a pid of the sandbox's own PID namespace.
    The host group is the one assay recorded in ``runs/<run>/pgids`` for the seat's folder."""
    runs = repo.root / ".assay" / "runs"
    outputs = repo.root / ".assay" / "seats"
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, proc.communicate()
        started = list(outputs.glob("*/seat-*.out/attempt-*/started"))
        recorded = [
            line.split() for p in runs.glob("*/pgids") for line in p.read_text().splitlines()
        ]
        coders = [int(f[0]) for f in recorded if len(f) == 3 and "/seats/" in f[2]]
        if started and coders:
            return coders[-1]
        assert time.monotonic() < deadline, "the coder never started"
        time.sleep(0.05)


def _group_gone(pgid: int) -> bool:
    """True once no process is left in the group (its last members may still be reaped)."""
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize(
    ("command", "sig", "code"),
    [
        ("run", signal.SIGINT, 130),
        ("run", signal.SIGTERM, 143),
        ("serve", signal.SIGTERM, 143),
        ("serve", signal.SIGINT, 130),
    ],
)
def test_a_signal_stops_the_coder_and_closes_the_run_as_interrupted(
    tmp_path: Path, command: str, sig: signal.Signals, code: int
) -> None:
    repo = make_repo(tmp_path)
    mark = '"$(dirname "$ASSAY_REPORT_PATH")/started"'  # in the seat's output folder
    flags = [
        "--coder", "command", "--coder-command", f"echo $$ > {mark}; sleep 30",
        "--validator", "true", "--land", "merge",
    ]  # fmt: skip
    if command == "run":
        proc = _start(repo, "run", "do it", *flags)
    else:
        added = repo.main("task", "add", "do it", *flags)
        assert added.returncode == 0, added.stderr
        proc = _start(repo, "serve", "--poll", "0.1", "--no-web")
    coder = _wait_for_coder(repo, proc)
    os.killpg(coder, 0)  # the group recorded is there (raises if not) until the signal

    started = time.monotonic()
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert time.monotonic() - started < 10  # TERM was enough; no 30 s sleep waited out
    assert "Traceback" not in err
    if command == "serve":  # the interrupted run closed: it counts, and is said to be one
        assert "served 1 run(s) (1 interrupted)" in err
    assert _group_gone(coder), "a process of the coder's group outlived assay"

    tasks = json.loads(repo.main("task", "list", "--json").stdout)
    assert tasks[0]["attempts"] == 0  # refunded: its budget intact
    if command == "run":  # its user stopped it: it stays stopped until released
        how = "Ctrl-C" if sig is signal.SIGINT else "SIGTERM"
        assert [t["status"] for t in tasks] == ["held"]
        assert (tasks[0]["hold_source"], tasks[0]["hold_reason"]) == (
            "manual",
            f"stopped by the user ({how})",
        )
        assert f"to run it again: assay task release {tasks[0]['id']}" in err
    else:  # the queue stopped, not the task: runnable again
        assert [t["status"] for t in tasks] == ["failed"]
    (payload,) = repo.payloads()
    assert payload["status"] == "failed"
    assert payload["halt_type"] == "environment_error"
    assert payload["attempt_spent"] is False
    assert sig.name in payload["reason"]
    assert payload["attempts"]["total"] == 1
    assert payload["attempts"]["coder_dispatches"] == 1
    with Ledger.open(f"sqlite:///{repo.root / '.assay' / 'assay.db'}") as ledger:
        (run,) = ledger.runs(tasks[0]["id"])
        assert not run.open and run.status.value == "failed"
        assert len(ledger.dispatches(run.id)) == 1
    assert git(repo.root, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not list((repo.root / ".assay" / "seats").glob("*/*"))  # no seat repository left
    assert git(repo.root, "branch", "--list", "assay/*") == ""
