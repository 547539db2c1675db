"""``--events jsonl``: the ledger's events on stdout, one JSON object a line, as they happen.

The stream follows the ledger itself rather than the run's in-memory events, so every line
carries the event's ledger id and time and is exactly the object the dashboard's ``/events``
serves (``adapters.store.event_document``), events the run does not emit itself included
(``task.added``, ``run.opened``, ``run.closed``) and those another process writes (a Temporal
worker, for ``serve --temporal``). It reads from a cursor taken when the command began: a
poller thread every ``POLL_SECONDS``, the run's own sink right after each event is journaled
(so a line leaves as its event is written, not a tick later), and a last read when the
command stops, so nothing written before its result is missed.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from assay.adapters.store.records import Event
    from assay.adapters.store.sql import Ledger

POLL_SECONDS = 0.2
BATCH = 500


def newest_event_id(ledger: Ledger) -> int:
    """The id of the ledger's newest event (0 when it has none): where a stream starts."""
    import sqlalchemy as sa

    from assay.adapters.store.schema import events

    with ledger.read() as conn:
        found = conn.execute(sa.select(sa.func.max(events.c.id))).scalar()
    return int(found or 0)


class EventStream:
    """Writes each ledger event after ``after`` that ``wants`` to ``out``, once, in id order.

    ``wants`` is asked at write time, so a caller can widen it (a task it just queued) before
    the events of that task are read. A reader that went away (a closed pipe) ends the stream,
    never the run.
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        after: int,
        wants: Callable[[Event], bool] = lambda _event: True,
        out: TextIO | None = None,
        poll: float = POLL_SECONDS,
    ) -> None:
        self.ledger = ledger
        self.cursor = after
        self.wants = wants
        self.out = out if out is not None else sys.stdout
        self.poll = poll
        self.written = 0
        self.broken = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def pump(self) -> None:
        """Write every event appended since the last call (safe from any thread)."""
        from assay.adapters.store.event_document import event_line

        with self._lock:
            while not self.broken:
                batch = self.ledger.events_after(self.cursor, BATCH)
                for event in batch:
                    self.cursor = event.id
                    if self.wants(event):
                        self._write(event_line(event))
                if len(batch) < BATCH:
                    return

    def pump_quietly(self) -> None:
        """A pump whose failure (a locked or briefly unreachable ledger) waits for the next
        one: the stream must never be what stops a run."""
        with contextlib.suppress(Exception):
            self.pump()

    @contextlib.contextmanager
    def following(self) -> Iterator[EventStream]:
        """Poll in a thread while the block runs; read the rest once it ends."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._follow, name="assay-events", daemon=True)
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.pump_quietly()

    def _follow(self) -> None:
        while not self._stop.wait(self.poll):
            self.pump_quietly()

    def _write(self, line: str) -> None:
        try:
            self.out.write(line + "\n")
            self.out.flush()
        except (BrokenPipeError, ValueError, OSError):
            # Nobody reads any more: stop writing, let the run finish and close.
            self.broken = True
            _discard_stdout(self.out)
        else:
            self.written += 1


def _discard_stdout(out: TextIO) -> None:
    """Point a stdout whose reader left at /dev/null: the result line and the interpreter's
    own flush at exit then go nowhere instead of raising BrokenPipeError a second time."""
    import os

    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)
