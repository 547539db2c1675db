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
import json
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from pathlib import Path

from assay.adapters.process_groups import GROUPS_FILE, STOP_FILE, stop_recorded_groups
from assay.adapters.store.halt_files import write_json_atomic

__all__ = ["STOP_FILE", "StopAsk", "asked", "read_ask", "send_ask", "watching"]

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
    KILL): in a thread of its own unless ``wait``, so the caller never waits on the grace."""
    write_json_atomic(run_dir / STOP_FILE, asdict(ask))
    groups = run_dir / GROUPS_FILE
    if wait:
        stop_recorded_groups(groups)
        return
    threading.Thread(target=stop_recorded_groups, args=(groups,), daemon=True).start()


def read_ask(run_dir: Path) -> StopAsk | None:
    """The request left for the run in ``run_dir``; None when there is none. An unreadable or
    foreign file is still a request (its details said as unknown)."""
    path = run_dir / STOP_FILE
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_ASK_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError:
        return StopAsk(action="hold", by="unknown", via="unknown", reason="stop requested")
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


@contextlib.contextmanager
def watching(run_dir: Path) -> Iterator[None]:
    """Everything run in this context (tasks and threads it starts inherit it) belongs to the
    run in ``run_dir``: :func:`asked` looks there."""
    token = _watched.set(run_dir)
    try:
        yield
    finally:
        _watched.reset(token)


def asked() -> StopAsk | None:
    """The stop request of the run this code belongs to, if an operator sent one."""
    run_dir = _watched.get()
    if run_dir is None or not (run_dir / STOP_FILE).exists():
        return None
    return read_ask(run_dir)
