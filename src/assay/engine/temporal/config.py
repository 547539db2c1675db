"""Names and timeouts the Temporal executor's processes agree on (no Temporal import here)."""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
from dataclasses import dataclass

DEFAULT_TASK_QUEUE = "assay"
DEFAULT_NAMESPACE = "default"
TEMPORAL_ENV = "ASSAY_TEMPORAL"  # HOST:PORT: the CLI's cancel and hold reach the workflow
NAMESPACE_ENV = "ASSAY_TEMPORAL_NAMESPACE"
WORKFLOW_NAME = "assay.run"
STOP_SIGNAL = "stop"


def workflow_id(task_id: str) -> str:
    """One workflow per task at a time: Temporal refuses a second while one runs, so a task
    submitted twice (two serves, a rescan) is never run twice at once."""
    return f"assay-{task_id}"


def repository_queue(shared: str, repository: str | None) -> str:
    """Where the runs of a repository's tasks are opened: only that repository's workers poll
    it (a task that names none opens on the shared queue, as any worker may run it). The id
    is hashed: it may be a long path, and a queue name need not show it."""
    if repository is None:
        return shared
    return f"{shared}@{hashlib.sha256(repository.encode()).hexdigest()[:12]}"


def close_queue(shared: str) -> str:
    """Where a lost run is closed: any worker of the queue's repository (``shared`` is its
    :func:`repository_queue`) serves it, whatever runs it holds."""
    return f"{shared}-close"


def own_queue(shared: str) -> str:
    """This worker's own queue: every activity of a run it opened comes here."""
    host = socket.gethostname().split(".")[0] or "host"
    return f"{shared}-{host}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class Timeouts:
    """How long the workflow waits for a worker, in seconds.

    ``heartbeat``: every activity on a worker's own queue heartbeats; silence this long means
    the worker is gone. ``schedule_to_start``: an activity no worker picked up this long after
    it was scheduled on the run's worker queue: the worker is gone (a live one never lets its
    own queue wait: it takes every activity of its runs at once)."""

    heartbeat: float = 10.0
    schedule_to_start: float = 10.0
    short: float = 300.0  # open, preflight, arm, fire, emit, fired_halts, record, close
    validate: float = 4 * 3600.0
    land: float = 3600.0
    dispatch_margin: float = 600.0  # beyond the coder's own timeout
    judge: float = 3600.0
