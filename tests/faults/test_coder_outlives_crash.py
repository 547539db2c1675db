"""A coder's process group does not outlive a crash of assay: `kill -9` leaves the coder
running in its own session, and recovery (`assay run --resume`) ends it, from the group ids the
run recorded in its folder."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.repo import ASSAY, git, make_repo

from assay.adapters.process_groups import GROUPS_FILE, start_time

pytestmark = pytest.mark.slow


def _alive(pid: int) -> bool:
    state = Path(f"/proc/{pid}/stat")
    try:
        return state.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_resume_ends_the_coder_of_a_run_whose_assay_was_killed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    pidfile = tmp_path / "coder.pid"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    # The first coder sleeps (and is killed with assay); the resumed run's coder writes a file.
    script = (
        f"if [ -e {pidfile} ]; then echo x > a.txt; else echo $$ > {pidfile}; exec sleep 30; fi"
    )
    argv = [
        str(ASSAY), "run", "do it",
        "--coder", "command", "--coder-command", script,
        "--validator", "true", "--land", "merge",
    ]  # fmt: skip
    proc = subprocess.Popen(
        argv, cwd=repo.root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    groups = repo.root / ".assay" / "runs"
    while (
        not pidfile.exists()
        or not pidfile.read_text().strip()
        or not any(groups.glob(f"*/{GROUPS_FILE}"))
    ):  # the coder started, and assay recorded its group
        assert proc.poll() is None and time.monotonic() < deadline, "the coder never started"
        time.sleep(0.05)
    coder = int(pidfile.read_text())
    (run_dir,) = groups.iterdir()
    recorded = (run_dir / GROUPS_FILE).read_text().split()
    assert int(recorded[0]) == coder and int(recorded[1]) == start_time(coder)

    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert _alive(coder), "the coder should outlive a kill -9 of assay (its own session)"

    resumed = repo.assay("run", "--resume", "--json", timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    deadline = time.monotonic() + 5
    while _alive(coder) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(coder), "recovery left the dead run's coder running"
    assert git(repo.root, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not list((repo.root / ".assay" / "seats").glob("*/*"))  # no seat repository left
