"""A worker killed (kill -9) or stopped (SIGTERM) mid-dispatch: the run is closed once as an
environment error (refunded) and runs again on the other worker, through the real commands."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import psycopg
import pytest
from support.repo import ASSAY

from .conftest import Workers, add_task, assay_env, show_task

pytestmark = pytest.mark.slow


def _holder(pids: set[int], needle: str) -> int | None:
    """The worker among ``pids`` whose descendant runs ``needle``."""
    found = subprocess.run(["pgrep", "-f", needle], capture_output=True, text=True, check=False)
    for start in map(int, found.stdout.split()):
        pid = start
        while pid > 1:
            if pid in pids:
                return pid
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                break
            pid = int(stat.rsplit(")", 1)[1].split()[1])
    return None


@pytest.mark.parametrize(
    ("stop", "said"),
    [(signal.SIGKILL, "was lost"), (signal.SIGTERM, "interrupted by SIGTERM")],
    ids=["kill-9", "sigterm"],
)
def test_a_killed_worker_loses_its_run_once_and_the_other_worker_finishes_it(
    workers: Workers, tmp_path: Path, stop: signal.Signals, said: str
) -> None:
    repo, pg = workers.repo, workers.pg_url
    marker = tmp_path / "first-dispatch"
    fixed = repo.put("fixed.py", "src/slug.py")
    # The first dispatch sleeps (and its worker is killed); the next one fixes the bug.
    coder = f"test -e {marker} && {{ {fixed}; }} || {{ touch {marker}; sleep 131; }}"
    contract = repo.contract(
        "lost.yaml",
        f"""task: Make slugify keep digits.
scope: {{allow: ["src/**"]}}
coder: {{kind: command, command: {json.dumps(coder)}, timeout_seconds: 600}}
validators:
  - {{id: tests, kind: command, run: "true"}}
land: branch
sandbox: none
""",
    )
    task_id = add_task(repo, pg, contract)
    one, _ = workers.start("--max-dispatches", "1")
    two, _ = workers.start("--max-dispatches", "1")
    serve = subprocess.Popen(
        [str(ASSAY), "serve", "--temporal", workers.temporal, "--once", "--poll", "0.2"],
        cwd=repo.root,
        env=assay_env(pg),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        holder = None
        while holder is None:
            assert time.monotonic() < deadline, "the first dispatch never started"
            time.sleep(0.2)
            holder = _holder({one.pid, two.pid}, "sleep 131")
        (one if holder == one.pid else two).send_signal(stop)  # mid-dispatch
        killed = time.monotonic()
        _out, err = serve.communicate(timeout=120)
        assert serve.returncode == 0, err
        assert time.monotonic() - killed < 60, "the lost worker was noticed too late"
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    shown = show_task(repo, pg, task_id)
    assert shown["status"] == "done", shown
    assert shown["attempts"] == 1  # the lost run was refunded
    runs = shown["runs"]
    assert isinstance(runs, list) and [r["status"] for r in runs] == ["failed", "ready"], runs
    with psycopg.connect(pg.replace("postgresql+psycopg://", "postgresql://")) as conn:
        closes = conn.execute(
            "select run_id, count(*) from events where kind in ('run.closed', 'run_closed')"
            " group by run_id"
        ).fetchall()
        interrupted = conn.execute(
            "select count(*) from events where kind = 'run.interrupted'"
        ).fetchone()
        dispatches = conn.execute("select run_id, count(*) from dispatches group by run_id")
        counted = dict(dispatches.fetchall())
    assert interrupted == (1,)  # closed exactly once, as lost
    assert {r["id"]: counted.get(r["id"]) for r in runs} == {runs[0]["id"]: 1, runs[1]["id"]: 1}
    lost = json.loads(repo.assay("payload", "show", runs[0]["id"], **assay_env(pg)).stdout)
    assert lost["halt_type"] == "environment_error" and lost["attempt_spent"] is False
    assert said in lost["reason"], lost["reason"]
    assert lost["attempts"]["coder_dispatches"] == 1
    assert dict(closes) == {runs[0]["id"]: 1, runs[1]["id"]: 1}  # each run closed once
