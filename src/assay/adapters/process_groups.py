"""The process groups a run started, recorded in its folder so they never outlive a crash.

Every child group :func:`assay.adapters.process.run_process` starts while a run records
(:func:`recording_groups`) gets one line appended to ``runs/<run>/pgids``: the group id, the
leader's start time (``/proc/<pid>/stat`` field 22) and its working folder. If assay dies
(``kill -9``), its coders live on in their own sessions; recovery calls
:func:`stop_recorded_groups`, which ends each group still there — TERM, a grace period, KILL —
but only when it is provably the one recorded: its leader has the recorded start time, or the
leader is gone and members remain (a group id is not reused while any member lives). A group
id the system has since given to someone else is left alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

GROUPS_FILE = "pgids"
STOP_FILE = "stop-request.json"
"""An operator's request to stop the run (:mod:`assay.adapters.stop_request`), beside its
groups: a group recorded once it is there is ended at once."""
STOP_GRACE_SECONDS = 3.0

_recording: ContextVar[Path | None] = ContextVar("assay_process_groups", default=None)


@contextlib.contextmanager
def recording_groups(path: Path) -> Iterator[None]:
    """Record every group started in this context (threads started with ``asyncio.to_thread``
    inherit it) in ``path``."""
    token = _recording.set(path)
    try:
        yield
    finally:
        _recording.reset(token)


def record_group(pid: int, cwd: Path) -> None:
    """Append ``pid``'s group to the recording file, if one is set; best effort, never raises
    (a group not recorded is still stopped by a live assay; only a crash could miss it)."""
    path = _recording.get()
    started = start_time(pid)
    if path is None or started is None:
        return
    line = f"{pid} {started} {cwd}\n".encode()
    with contextlib.suppress(OSError):
        # One write of a short line to an O_APPEND file: concurrent seats never interleave.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    # Recorded first, looked for after: a stopper that wrote the request before reading the
    # groups either finds this one or is found here, so no group outlives a stop request.
    if os.path.lexists(path.parent / STOP_FILE):  # any entry there: a link counts too
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _members(pgid: int) -> bool:
    """Whether any live process is still in group ``pgid``. A zombie is not one: it has ended
    and waits only to be reaped, by an init that may take seconds to do it, and no signal can
    end it again."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        entries = os.listdir("/proc")
    except OSError:  # no /proc: every member counts
        return True
    return any(entry.isdigit() and _live_member(int(entry), pgid) for entry in entries)


def _live_member(pid: int, pgid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if int(fields[2]) != pgid:
            return False
    except (OSError, IndexError, ValueError):
        return False  # gone since the listing
    return fields[0] != "Z" or _live_thread(pid)


def _live_thread(pid: int) -> bool:
    """Whether a process shown as a zombie still has a running thread: when its main thread
    ends alone (``pthread_exit``) the process is shown "Z", its other threads running on."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in threads:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] != "Z":
                return True
        except (OSError, IndexError):
            continue  # that thread ended since the listing
    return False


def _recorded(path: Path) -> list[tuple[int, int]]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split(maxsplit=2)
        with contextlib.suppress(ValueError, IndexError):
            pgid, started = int(fields[0]), int(fields[1])
            if pgid > 1:
                found.append((pgid, started))
    return found


def stop_recorded_groups(path: Path, grace: float = STOP_GRACE_SECONDS) -> list[int]:
    """End every group recorded in ``path`` that is still the one recorded; the ids ended."""
    ours = []
    for pgid, started in _recorded(path):
        leader = start_time(pgid)
        # The leader recorded, or no leader and members left: ours. Another start time:
        # the id was reused after our group ended, so not ours.
        if (leader == started or leader is None) and _members(pgid) and pgid != os.getpgrp():
            ours.append(pgid)
    for pgid in ours:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
            # A stopped member (SIGSTOP, Ctrl-Z) holds the TERM until it runs again: without
            # CONT it would live out the whole grace period, and end only by the KILL.
            os.killpg(pgid, signal.SIGCONT)
    deadline = time.monotonic() + grace
    while any(_members(p) for p in ours) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pgid in ours:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    return ours
