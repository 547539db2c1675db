"""Environment faults through the real `assay` command: charged as what they are.

A coder whose output hits the file-size limit (RLIMIT_FSIZE, set on the `assay` process as
root cannot be denied a write) is an environment fault: the attempt is refunded and the
reason names the limit, never "could not start '/bin/sh'".
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

from support.repo import ASSAY, make_repo

LIMIT = 4_000_000  # far above the ledger, payload and git objects; below the coder's output


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def test_a_coder_log_over_the_file_size_limit_is_refunded_and_named(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    done = subprocess.run(
        [
            str(ASSAY),
            "run",
            "make it chatty",
            "--coder-command",
            f"head -c {LIMIT * 2} /dev/zero; echo x >> src/slug.py",
            "--validator",
            "true",
            "--land",
            "none",
            "--json",
        ],
        cwd=repo.root,
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
        check=False,
        preexec_fn=_limit_file_size,
    )
    assert done.returncode == 1, done.stderr
    payload = json.loads(done.stdout)
    assert payload["halt_type"] == "environment_error"
    assert payload["attempt_spent"] is False and payload["task_status"] == "failed"
    assert "hit the file-size limit (RLIMIT_FSIZE)" in payload["reason"]
    assert "could not start" not in payload["reason"]
    [seat] = payload["candidates"]
    assert "RLIMIT_FSIZE" in seat["fault"]
