"""``GET /events``: the ledger's event log as a server-sent event stream.

One poller per app reads ``events_after`` every ~200 ms (in a thread: the ledger is blocking)
and hands each new event to every open stream; a stream first catches up from its own
``after`` (or ``Last-Event-ID``) by reading the ledger itself, then takes the poller's events,
skipping any it already sent. So a page that says "I have seen up to event N" misses nothing
and sees nothing twice, and a hundred open pages cost one query per tick.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response, StreamingResponse

from assay.adapters.store.event_document import event_line
from assay.adapters.store.records import Event
from assay.adapters.store.sql import Ledger
from assay.web.config import WebConfig

router = APIRouter()

POLL_SECONDS = 0.2
KEEPALIVE_SECONDS = 15.0
BATCH = 500
QUEUE_LIMIT = 10_000


@router.get("/events")
async def events(
    request: Request,
    after: int | None = None,
    run_id: str | None = None,
    task_id: str | None = None,
    plain: bool = False,
) -> Response:
    """``plain``: no ``event:`` line, so every kind reaches an EventSource's one ``message``
    listener (live.js; a named event only reaches listeners of that name)."""
    config: WebConfig = request.app.state.config
    hub = _hub(request, config.ledger)
    resume = request.headers.get("last-event-id", "")
    if resume.isdigit():
        after = int(resume)
    if after is not None and after < 0:
        after = 0
    stream = hub.subscribe(after, run_id=run_id, task_id=task_id, named=not plain)
    return StreamingResponse(
        stream,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def message(event: Event, *, named: bool = True) -> str:
    """One SSE message: ``id``, ``event`` (the kind) and the event as JSON on one line (the
    same object ``assay run --events jsonl`` prints)."""
    name = f"event: {event.kind}\n" if named else ""
    return f"id: {event.id}\n{name}data: {event_line(event)}\n\n"


@dataclass(eq=False)  # compared (and hashed) by identity: one per open stream
class _Subscriber:
    run_id: str | None
    task_id: str | None
    queue: asyncio.Queue[Event | None] = field(default_factory=lambda: asyncio.Queue(QUEUE_LIMIT))

    def wants(self, event: Event) -> bool:
        return (self.run_id is None or event.run_id == self.run_id) and (
            self.task_id is None or event.task_id == self.task_id
        )


class Hub:
    """The shared poller and its subscribers (one per app, on the app's event loop)."""

    def __init__(self, ledger: Ledger, *, poll: float = POLL_SECONDS) -> None:
        self.ledger = ledger
        self.poll = poll
        self.subscribers: set[_Subscriber] = set()
        self.cursor: int | None = None  # the newest event id the poller has seen
        self.closed = False
        self._task: asyncio.Task[None] | None = None

    def close(self) -> None:
        """End every stream (the server is stopping); later ones end at once."""
        self.closed = True
        for sub in list(self.subscribers):
            self._end(sub)

    async def subscribe(
        self, after: int | None, *, run_id: str | None, task_id: str | None, named: bool = True
    ) -> AsyncIterator[str]:
        if self.closed:
            return
        sub = _Subscriber(run_id, task_id)
        # Registered before catching up: an event the catch-up read misses reaches the queue.
        self.subscribers.add(sub)
        self._ensure_polling()
        try:
            if after is None:
                after = await self._newest()
            sent = after
            yield f"retry: 2000\n: after {after}\n\n"
            while True:
                batch = await anyio.to_thread.run_sync(self._read, sent, run_id, task_id)
                for caught in batch:
                    sent = caught.id
                    yield message(caught, named=named)
                if len(batch) < BATCH:
                    break
            while True:
                try:
                    event: Event | None = await asyncio.wait_for(sub.queue.get(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    yield ": keepalive\n\n"
                    continue
                if event is None:
                    return  # fell too far behind (or the hub closed): the browser reconnects
                if event.id > sent:
                    sent = event.id
                    yield message(event, named=named)
        finally:
            self.subscribers.discard(sub)

    def _read(self, after: int, run_id: str | None, task_id: str | None) -> list[Event]:
        return self.ledger.events_after(after, BATCH, run_id=run_id, task_id=task_id)

    async def _newest(self) -> int:
        # The ledger's, not the poller's cursor: that may be a tick behind "now".
        return await anyio.to_thread.run_sync(_newest_id, self.ledger)

    def _ensure_polling(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        """Poll while anyone listens; stop when the last stream closes."""
        if self.cursor is None:
            self.cursor = await anyio.to_thread.run_sync(_newest_id, self.ledger)
        while self.subscribers and not self.closed:
            await asyncio.sleep(self.poll)
            try:
                batch = await anyio.to_thread.run_sync(self._read, self.cursor, None, None)
            except Exception:  # a locked or briefly unreachable ledger: try again next tick
                continue
            for event in batch:
                self.cursor = event.id
                self._fan_out(event)

    def _fan_out(self, event: Event) -> None:
        for sub in list(self.subscribers):
            if not sub.wants(event):
                continue
            try:
                sub.queue.put_nowait(event)
            except asyncio.QueueFull:
                self._end(sub)

    def _end(self, sub: _Subscriber) -> None:
        """Tell one stream to end (making room for the word if its queue is full)."""
        self.subscribers.discard(sub)
        if sub.queue.full():
            sub.queue.get_nowait()
        sub.queue.put_nowait(None)


def close_streams(app: FastAPI) -> None:
    """End the app's open streams (call on its event loop)."""
    hub: Hub | None = getattr(app.state, "live_hub", None)
    if hub is not None:
        hub.close()


def _newest_id(ledger: Ledger) -> int:
    import sqlalchemy as sa

    from assay.adapters.store.schema import events as events_table

    with ledger.read() as conn:
        found: Any = conn.execute(sa.select(sa.func.max(events_table.c.id))).scalar()
    return int(found or 0)


def _hub(request: Request, ledger: Ledger) -> Hub:
    state = request.app.state
    hub: Hub | None = getattr(state, "live_hub", None)
    if hub is None:
        hub = Hub(ledger)
        state.live_hub = hub
    return hub
