"""A run killed with SIGKILL is found by `assay run --resume`: recorded once, then continued."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from support.repo import ASSAY, make_repo

STARTED = "*/seat-*.out/attempt-*/started"  # what the coder leaves in its output folder


def test_kill_9_then_resume_counts_the_interrupted_attempt_once(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    # The seat's sandbox sees no test folder but one the contract's env: names (read-only):
    # the test marks it before the resume; the first coder says it started in its output
    # folder.
    state = tmp_path / "state"
    state.mkdir()
    coder = (
        "if [ -f $CRASH_STATE/second-time ]; then echo fixed > src/done.txt; "
        "else echo $$ > $(dirname $ASSAY_REPORT_PATH)/started; sleep 60; fi"
    )
    contract = repo.contract(
        "crash.yaml",
        f"""task: survive a crash
coder: {{kind: command, command: "{coder}", timeout_seconds: 120}}
validators: [{{id: done, kind: command, run: "test -f src/done.txt"}}]
land: merge
env: {{CRASH_STATE: "{state}"}}
""",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    victim = subprocess.Popen(
        [str(ASSAY), "run", "--contract", str(contract)],
        cwd=repo.root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    outputs = repo.root / ".assay" / "seats"
    deadline = time.monotonic() + 30
    while not any(outputs.glob(STARTED)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any(outputs.glob(STARTED)), "the coder never started"
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    # The sandboxed coder ends with assay (bwrap's --die-with-parent); no orphan to kill.
    (state / "second-time").touch()
    # The kill needs a process; the recovery and what it left are read in-process.

    resumed = repo.main("run", "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert (
        "interrupted, refunded (task " in resumed.stderr and "failed, runnable)" in resumed.stderr
    )
    final = json.loads(resumed.stdout)
    assert final["status"] == "merged" and final["task_status"] == "done"

    shown = json.loads(repo.main("task", "list", "--json").stdout)
    assert len(shown) == 1
    task = shown[0]
    assert task["attempts"] == 1  # the interrupted attempt was refunded, the second spent
    runs = json.loads(repo.main("task", "show", task["id"], "--json").stdout)["runs"]
    assert [r["status"] for r in runs] == ["failed", "merged"]
    interrupted = json.loads(Path(runs[0]["payload_path"]).read_text())
    assert interrupted["halt_type"] == "environment_error"
    history = [{"attempt": 1, "outcome": "error", "interrupted": True}]
    assert interrupted["attempts"]["history"] == history

    again = repo.main("run", "--resume")
    assert again.returncode == 0
    assert "no interrupted run" in again.stderr
    ledger = json.loads(repo.main("ledger", "show", task["id"], "--json").stdout)
    assert ledger["stage_state"]["task"]["attempts"] == 1
