"""The exclusive lock a run holds on its folder while it lives, so a later process can tell an
interrupted run (lock free, run still open) from one still running."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def hold_run_lock(run_dir: Path) -> int:
    fd = os.open(run_dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, str(os.getpid()).encode())
    return fd


def run_is_alive(run_dir: Path) -> bool:
    """True while some process holds the run's lock (it is still running)."""
    lock = run_dir / "lock"
    if not lock.exists():
        return False
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
