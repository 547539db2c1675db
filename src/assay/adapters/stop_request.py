"""An operator's request to stop one local run, left in its run folder for the run to act on.

``assay task stop`` and the dashboard's stop button reach a run on this machine this way, the
same way whoever asks: the request is written to ``runs/<run>/stop-request.json`` (whole, or
not at all), then the run's recorded process groups (``runs/<run>/pgids``) are ended as a
crash recovery ends them. The run looks for the file at every effect boundary
(:func:`asked`, with the run folder set by :func:`watching` for everything the run does) and
closes as interrupted, its task held with the request's reason, by whom it says. A group the
run starts after the request was written is ended as soon as it is recorded
(:mod:`assay.adapters.process_groups`), so no coder or validator outlives the request.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import stat
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from pathlib import Path

from assay.adapters.process import stop_requested
from assay.adapters.process_groups import GROUPS_FILE, STOP_FILE, stop_recorded_groups
from assay.adapters.store.halt_files import write_json_atomic

__all__ = [
    "STOP_FILE",
    "WATCHED_FILE",
    "StopAsk",
    "asked",
    "mark_watched",
    "read_ask",
    "send_ask",
    "watched",
    "watching",
]
# In a run's folder when the run reads its stop requests (a local run does; a run a Temporal
# worker holds is stopped through its workflow): a request elsewhere would reach no one.
WATCHED_FILE = "stop-watched"

MAX_ASK_BYTES = 16_384
"""A request file larger than this is not one assay wrote: it is read as a request without
its details (the run still stops: the file's presence is the request)."""

_watched: ContextVar[Path | None] = ContextVar("assay_stop_request", default=None)


@dataclass(frozen=True)
class StopAsk:
    """What was asked: ``action`` (``hold`` or ``cancel``), by whom, from where, and why."""

    action: str
    by: str
    via: str
    reason: str


def send_ask(run_dir: Path, ask: StopAsk, *, wait: bool = False) -> None:
    """Write the request, then end the run's recorded process groups (TERM, a grace period,
    KILL): in a thread of its own unless ``wait``, so the caller never waits on the grace. Not
    a daemon: a sender that exits at once (``task stop --wait 0``) still sends the KILL."""
    write_json_atomic(run_dir / STOP_FILE, asdict(ask))
    groups = run_dir / GROUPS_FILE
    if wait:
        stop_recorded_groups(groups)
        return
    threading.Thread(target=stop_recorded_groups, args=(groups,)).start()


def read_ask(run_dir: Path) -> StopAsk | None:
    """The request left for the run in ``run_dir``; None when there is none. An unreadable or
    foreign entry (a link, followed or dangling; a pipe; a folder) is still a request, its
    details said as unknown."""
    try:
        raw = _read_regular(run_dir / STOP_FILE)
    except FileNotFoundError:
        return None
    except OSError:  # a link, a pipe, a folder: not one assay wrote (and never waited on)
        raw = b""
    try:
        data = json.loads(raw) if len(raw) <= MAX_ASK_BYTES else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        data = {}

    def field(name: str, default: str) -> str:
        value = data.get(name)
        return value if isinstance(value, str) and value else default

    action = field("action", "hold")
    return StopAsk(
        action=action if action in ("hold", "cancel") else "hold",
        by=field("by", "unknown"),
        via=field("via", "unknown"),
        reason=field("reason", "stop requested"),
    )


def _read_regular(path: Path) -> bytes:
    """Up to ``MAX_ASK_BYTES + 1`` bytes of ``path``, a regular file itself; else OSError. Never
    through a link, and never blocking (a pipe there would hold the run at every boundary)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return os.read(fd, MAX_ASK_BYTES + 1)
    finally:
        os.close(fd)


@contextlib.contextmanager
def watching(run_dir: Path) -> Iterator[None]:
    """Everything run in this context (tasks and threads it starts inherit it) belongs to the
    run in ``run_dir``: :func:`asked` looks there."""
    token = _watched.set(run_dir)
    try:
        yield
    finally:
        _watched.reset(token)


def mark_watched(run_dir: Path) -> None:
    """Mark ``run_dir`` as read for stop requests when the code making it watches it."""
    if _watched.get() == run_dir:
        (run_dir / WATCHED_FILE).touch()


def watched(run_dir: Path) -> bool:
    """Whether the run in ``run_dir`` reads the stop requests sent there."""
    return (run_dir / WATCHED_FILE).is_file()


def stopping_now() -> str | None:
    """Why the code of a run must stop at its next step, in words: a signal to this process
    (Ctrl-C, SIGTERM) or an operator's stop request for its run; None to go on. For loops
    that run no process an operator's stop could end (assay's own model calls)."""
    signum = stop_requested()
    if signum is not None:
        return signal.Signals(signum).name
    ask = asked()
    return None if ask is None else f"{ask.action} by {ask.by} via {ask.via}"


def asked() -> StopAsk | None:
    """The stop request of the run this code belongs to, if an operator sent one."""
    run_dir = _watched.get()
    return read_ask(run_dir) if run_dir is not None else None
