"""Landing on the base branch: one squashed commit per run, found again by its trailer.

A landed run's commit carries ``Assay-Run: <run id>`` as a trailer, so a run interrupted
after the base branch moved is recognised when it is recovered and never landed twice.
"""

from __future__ import annotations

from pathlib import Path

from assay.adapters.git import _run, _text

RUN_TRAILER = "Assay-Run"
TASK_TRAILER = "Assay-Task"
ATTEMPTS_TRAILER = "Assay-Attempts"
CODER_TRAILER = "Assay-Coder"


def landed_commit(repo: Path, branch: str, run_id: str, since: str | None = None) -> str | None:
    """The commit on ``branch`` whose ``Assay-Run`` trailer names ``run_id``, if any.

    ``since`` (the run's base commit) bounds the search to what came after it.
    """
    tip = f"refs/heads/{branch}"
    done = _run(
        repo,
        "log",
        "--format=%H%x00%(trailers:key=" + RUN_TRAILER + ",valueonly,separator=%x01)",
        f"{since}..{tip}" if since else tip,
        "--",
        ok=(0, 128),
    )
    if done.returncode != 0:
        return None
    for line in _text(done.stdout).splitlines():
        commit, _, values = line.partition("\0")
        if run_id in (v.strip() for v in values.split("\x01")):
            return commit
    return None
