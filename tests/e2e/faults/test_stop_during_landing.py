"""A terminal's Ctrl-C goes to the whole foreground process group. Sent while assay moves the
base branch, it must reach assay alone: its own git finishes the landing, the run closes as
what the ledger says (merged, done), nothing is left behind, and never an internal error."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.repo import ASSAY, CHECK_TESTS, FIXED, git, make_repo

from assay.adapters.store.sql import Ledger

# A git that, moving main, says so and takes its time: the moment to send the signal.
SLOW_GIT = """#!/bin/sh
case "$*" in
  *update-ref*refs/heads/main*) : > "{mark}"; sleep 1.5 ;;
esac
exec {git} "$@"
"""


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_to_the_whole_group_while_main_moves_never_breaks_the_landing(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    repo = make_repo(tmp_path)
    base = git(repo.root, "rev-parse", "main")
    bin_dir, mark = tmp_path / "bin", tmp_path / "moving"
    bin_dir.mkdir()
    real_git = shutil.which("git")
    assert real_git
    (bin_dir / "git").write_text(SLOW_GIT.format(mark=mark, git=real_git))
    (bin_dir / "git").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    argv = [
        str(ASSAY), "run", "Make slugify keep digits.",
        "--coder", "command", "--coder-command", repo.put("fixed.py", "src/slug.py"),
        "--validator", CHECK_TESTS, "--land", "merge", "--json",
    ]  # fmt: skip
    proc = subprocess.Popen(
        argv,
        cwd=repo.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group, as a terminal's foreground job has
    )
    deadline = time.monotonic() + 60
    while not mark.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "main never started to move"
        time.sleep(0.02)
    os.killpg(proc.pid, sig)  # what the terminal does: the whole group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err and "internal error" not in err

    payload = json.loads(out)
    assert payload["halt_type"] != "internal_error"
    assert payload["status"] == "merged" and payload["task_status"] == "done"
    # Exactly one commit of the run on main, holding the fix.
    assert git(repo.root, "rev-list", "--count", f"{base}..main") == "1"
    assert git(repo.root, "show", "main:src/slug.py") + "\n" == FIXED
    with Ledger.open(f"sqlite:///{repo.root / '.assay' / 'assay.db'}") as ledger:
        (run,) = ledger.runs(payload["task_id"])
        assert not run.open and run.status.value == "merged"
        assert ledger.get_task(payload["task_id"]).status.value == "done"
    assert git(repo.root, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not list((repo.root / ".assay" / "seats").glob("*/*"))  # no seat repository left
    assert git(repo.root, "branch", "--list", "assay/*") == ""
