"""``GET /events``: the ledger's event log as a server-sent event stream.

One poller per app reads ``events_after`` every ~200 ms (in a thread: the ledger is blocking)
and hands each new event, already written as SSE text, to every open stream; a stream first
catches up from its own ``after`` (or ``Last-Event-ID``) by reading the ledger itself, then
takes the poller's events, skipping any it already sent. So a page that says "I have seen up to
event N" misses nothing and sees nothing twice, and a hundred open pages cost one query per
tick.

Open streams must not starve the pages: a catch-up from ``after=0`` on a big ledger is
thousands of rows to read and write out. Those reads run one at a time across all streams (a
page's work waits for at most one), each batch is turned into text in the same thread and
sent as one chunk. And a client holds at most ``WebConfig.stream_limit`` streams (per
credential; an anonymous reader per address), all clients together 16 times that: beyond, 429.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from assay.adapters.store.event_document import event_line
from assay.adapters.store.records import Event
from assay.adapters.store.sql import Ledger
from assay.web.auth import Credential
from assay.web.config import WebConfig
from assay.web.message_page import page

router = APIRouter()

POLL_SECONDS = 0.2
KEEPALIVE_SECONDS = 15.0
BATCH = 500
QUEUE_LIMIT = 10_000
ALL_CLIENTS_FACTOR = 16
RETRY_AFTER_SECONDS = 10


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
    client = client_key(request)
    if not hub.admit(client, config.stream_limit):
        refused = page(
            429,
            "Too many live streams",
            f"<p>At most {config.stream_limit} live streams per client; close a page "
            "(or wait for one to end) and try again.</p>",
        )
        refused.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return refused
    resume = request.headers.get("last-event-id", "")
    if resume.isdigit():
        after = int(resume)
    if after is not None and after < 0:
        after = 0
    stream = hub.subscribe(after, run_id=run_id, task_id=task_id, named=not plain)
    return _Stream(
        stream,
        on_close=lambda: hub.leave(client),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def client_key(request: Request) -> str:
    """Whose stream this is: the credential's name, else (anonymous) the peer's address."""
    credential = getattr(request.state, "credential", None)
    if isinstance(credential, Credential):
        return f"credential {credential.name}"
    return f"address {request.client.host if request.client else '?'}"


class _Stream(StreamingResponse):
    """A streamed answer that gives its client's slot back however it ends (even one that
    never started: its client left first)."""

    def __init__(self, content: AsyncIterator[str], on_close: Callable[[], None], **kw: Any):
        super().__init__(content, **kw)
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.on_close()


def message(event: Event, *, named: bool = True) -> str:
    """One SSE message: ``id``, ``event`` (the kind) and the event as JSON on one line (the
    same object ``assay run --events jsonl`` prints)."""
    name = f"event: {event.kind}\n" if named else ""
    return f"id: {event.id}\n{name}data: {event_line(event)}\n\n"


@dataclass(frozen=True)
class _Written:
    """One event and its two SSE spellings (made once, in the poller's thread)."""

    event: Event
    named: str
    plain: str

    @classmethod
    def of(cls, event: Event) -> _Written:
        return cls(event, message(event, named=True), message(event, named=False))


@dataclass(eq=False)  # compared (and hashed) by identity: one per open stream
class _Subscriber:
    run_id: str | None
    task_id: str | None
    queue: asyncio.Queue[_Written | None] = field(
        default_factory=lambda: asyncio.Queue(QUEUE_LIMIT)
    )

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
        self.clients: Counter[str] = Counter()
        self._task: asyncio.Task[None] | None = None
        self._catching_up: asyncio.Semaphore | None = None

    def admit(self, client: str, limit: int) -> bool:
        """Take one of ``client``'s stream slots, or say there is none left."""
        if self.clients[client] >= limit or self.clients.total() >= limit * ALL_CLIENTS_FACTOR:
            return False
        self.clients[client] += 1
        return True

    def leave(self, client: str) -> None:
        self.clients[client] -= 1
        if self.clients[client] <= 0:
            del self.clients[client]

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
                async with self._catch_up_turn():
                    last, text, count = await anyio.to_thread.run_sync(
                        self._read_written, sent, run_id, task_id, named
                    )
                if count:
                    sent = last
                    yield text
                if count < BATCH:
                    break
            while True:
                try:
                    got = await asyncio.wait_for(sub.queue.get(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    yield ": keepalive\n\n"
                    continue
                if got is None:
                    return  # fell too far behind (or the hub closed): the browser reconnects
                if got.event.id > sent:
                    sent = got.event.id
                    yield got.named if named else got.plain
        finally:
            self.subscribers.discard(sub)

    def _catch_up_turn(self) -> asyncio.Semaphore:
        if self._catching_up is None:
            self._catching_up = asyncio.Semaphore(1)
        return self._catching_up

    def _read(self, after: int, run_id: str | None, task_id: str | None) -> list[Event]:
        return self.ledger.events_after(after, BATCH, run_id=run_id, task_id=task_id)

    def _read_written(
        self, after: int, run_id: str | None, task_id: str | None, named: bool
    ) -> tuple[int, str, int]:
        """One catch-up batch as SSE text: (its last id, the text, how many events)."""
        batch = self._read(after, run_id, task_id)
        text = "".join(message(e, named=named) for e in batch)
        return (batch[-1].id if batch else after), text, len(batch)

    def _read_new(self, after: int) -> list[_Written]:
        return [_Written.of(e) for e in self._read(after, None, None)]

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
                batch = await anyio.to_thread.run_sync(self._read_new, self.cursor)
            except Exception:  # a locked or briefly unreachable ledger: try again next tick
                continue
            for written in batch:
                self.cursor = written.event.id
                self._fan_out(written)

    def _fan_out(self, written: _Written) -> None:
        for sub in list(self.subscribers):
            if not sub.wants(written.event):
                continue
            try:
                sub.queue.put_nowait(written)
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
