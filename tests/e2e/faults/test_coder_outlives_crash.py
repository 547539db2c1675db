"""A coder's process group does not outlive a crash of assay. Unconfined (`sandbox: none`),
`kill -9` leaves the coder running in its own session, and recovery (`assay run --resume`) ends
it, from the group ids the run recorded in its folder; in the seat's sandbox, bwrap's
`--die-with-parent` ends it with assay, and recovery closes the run all the same."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from support.repo import ASSAY, git, make_repo

from assay.adapters.process_groups import GROUPS_FILE, start_time


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
    # Unconfined on purpose: what is tested is a coder that outlives assay, which the sandbox
    # forbids by design (bwrap's --die-with-parent; see the sandboxed test below). The coder
    # also writes its pid to this test's folder, which a sandboxed seat cannot see.
    argv = [
        str(ASSAY), "run", "do it",
        "--coder", "command", "--coder-command", script,
        "--validator", "true", "--land", "merge", "--sandbox", "none",
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

    resumed = repo.main("run", "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    deadline = time.monotonic() + 5
    while _alive(coder) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(coder), "recovery left the dead run's coder running"
    assert git(repo.root, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not list((repo.root / ".assay" / "seats").glob("*/*"))  # no seat repository left


def _group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of group ``pgid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(stat.parent.name))
    return found


def test_a_sandboxed_coder_ends_with_a_killed_assay_and_resume_closes_the_run(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    state = tmp_path / "state"  # named in the contract's env: visible, read-only, in the seat
    state.mkdir()
    # The first coder says it started (in its output folder) and sleeps; the resumed run's coder,
    # once the test has marked the state, writes a file.
    script = (
        "if [ -e $CRASH_STATE/resumed ]; then echo x > a.txt; "
        "else echo $$ > $(dirname $ASSAY_REPORT_PATH)/started; exec sleep 30; fi"
    )
    contract = repo.contract(
        "crash.yaml",
        f"""task: do it
coder: {{kind: command, command: "{script}"}}
validators: [{{id: ok, kind: command, run: "true"}}]
land: merge
env: {{CRASH_STATE: "{state}"}}
""",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    proc = subprocess.Popen(
        [str(ASSAY), "run", "--contract", str(contract)],
        cwd=repo.root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    runs = repo.root / ".assay" / "runs"
    outputs = repo.root / ".assay" / "seats"
    while not any(outputs.glob("*/seat-*.out/attempt-*/started")) or not any(
        runs.glob(f"*/{GROUPS_FILE}")
    ):  # the coder started, and assay recorded its group
        assert proc.poll() is None and time.monotonic() < deadline, "the coder never started"
        time.sleep(0.05)
    (run_dir,) = runs.iterdir()
    coder = int((run_dir / GROUPS_FILE).read_text().split()[0])  # the sandbox's host group
    assert len(_group_members(coder)) >= 2  # bwrap and the sleeping coder inside

    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 5
    while _group_members(coder) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _group_members(coder), "the sandboxed coder outlived a kill -9 of assay"

    (state / "resumed").touch()
    resumed = repo.main("run", "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "merged"
    assert (repo.root / "a.txt").read_text() == "x\n"
    assert git(repo.root, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not list((repo.root / ".assay" / "seats").glob("*/*"))  # no seat repository left
