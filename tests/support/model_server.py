"""A scripted model server: a real HTTP server on 127.0.0.1 that answers like a model provider.

Not a mock: the clients under test (the ``openai`` SDK today, real agent programs later) go
through real sockets, status codes, headers and server-sent events, so their parsing and error
handling is what gets tested. A test scripts the turns; the server hands them out in order to
whichever completion endpoint is called, and records every request for assertions.

Each provider API is a *dialect* (``support.script.Dialect``) that renders the same
API-neutral :class:`Turn` in its own wire format: OpenAI Chat Completions
(``support.openai_chat``), Anthropic Messages (``support.anthropic_messages``) and OpenAI
Responses (``support.openai_responses``) are served side by side, each on its own path. The
server also answers ``HEAD /`` (a reachability probe) and ``GET /v1/models`` in a form both
OpenAI and Anthropic clients read.

The server keeps its own count of what it handed out (:attr:`ModelServer.handed_out`): the
usage each answer reported, summed over the answers it sent in full to a client still there to
read them. That count is learnt only from the wire, so it is what a program's accounting must
match. ``when_exhausted`` answers every request past the script, which scripts a coder that
loops forever (``when_exhausted=Turn.call("list_files", {"path": "."})``); :meth:`hold` keeps
one request waiting, so a test can kill the client at a known point.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from support.anthropic_messages import AnthropicMessages
from support.openai_chat import OpenAIChat
from support.openai_responses import OpenAIResponses
from support.script import (
    CREATED,
    DEFAULT_MODEL,
    Dialect,
    HttpError,
    RecordedRequest,
    Response,
    ScriptEntry,
    ToolCall,
    Turn,
    Usage,
    json_response,
    sse_event,
)

__all__ = [
    "DEFAULT_MODEL",
    "AnthropicMessages",
    "Dialect",
    "Gate",
    "HandedOut",
    "HttpError",
    "ModelServer",
    "OpenAIChat",
    "OpenAIResponses",
    "RecordedRequest",
    "Response",
    "ScriptEntry",
    "ToolCall",
    "Turn",
    "Usage",
    "json_response",
    "sse_event",
]


@dataclass(frozen=True)
class HandedOut:
    """What the answers the server sent reported they spent. ``cost`` is None when any answer
    went out without a cost (``priced_cost`` is then the sum of those that had one)."""

    answers: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    priced_cost: float = 0.0
    unpriced: int = 0  # answers sent without a cost

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    @property
    def cost(self) -> float | None:
        return None if self.unpriced else round(self.priced_cost, 9)

    def plus(self, usage: Usage) -> HandedOut:
        return HandedOut(
            answers=self.answers + 1,
            tokens_in=self.tokens_in + usage.prompt_tokens,
            tokens_out=self.tokens_out + usage.completion_tokens,
            priced_cost=round(self.priced_cost + (usage.cost or 0.0), 9),
            unpriced=self.unpriced + (usage.cost is None),
        )


class Gate:
    """One completion request held before it is answered (:meth:`ModelServer.hold`).

    ``reached`` is set when the request arrives; the answer waits until :meth:`open` (or
    ``timeout`` seconds), then goes out only if its client is still connected."""

    def __init__(self, timeout: float) -> None:
        self.reached = threading.Event()
        self.opened = threading.Event()
        self.timeout = timeout

    def wait(self, timeout: float) -> bool:
        """Whether the held request arrived within ``timeout`` seconds."""
        return self.reached.wait(timeout)

    def open(self) -> None:
        self.opened.set()


class ModelServer:
    """The scripted server. Use as a context manager, or ``start()`` / ``stop()``.

    ``base_url`` (``http://127.0.0.1:PORT/v1``) is what an OpenAI client is given. When the
    script runs out the server answers ``when_exhausted`` if given (a provider that keeps
    refusing: ``Turn.rate_limited()``), else 500 "script exhausted", so an over-long loop fails
    loudly instead of hanging.
    """

    def __init__(
        self,
        turns: Iterable[ScriptEntry] = (),
        *,
        dialects: Sequence[Dialect] | None = None,
        models: Sequence[str] = (DEFAULT_MODEL,),
        when_exhausted: ScriptEntry | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._script: deque[ScriptEntry] = deque(turns)
        self._requests: list[RecordedRequest] = []
        self._served = 0
        self._handed = HandedOut()
        self._dropped = 0
        self._gates: dict[int, Gate] = {}
        self.models = list(models)
        self.when_exhausted = when_exhausted
        self._routes: dict[str, Dialect] = {}
        for dialect in dialects or (OpenAIChat(), AnthropicMessages(), OpenAIResponses()):
            self.add_dialect(dialect)
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def add_dialect(self, dialect: Dialect) -> None:
        for path in dialect.paths:
            self._routes[path] = dialect

    def script(self, *turns: ScriptEntry) -> ModelServer:
        """Append turns to the script; returns the server, for chaining."""
        with self._lock:
            self._script.extend(turns)
        return self

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    def hold(self, nth: int, *, timeout: float = 60.0) -> Gate:
        """Hold the ``nth`` completion request (1-based, errors and retries included) until
        the returned gate is opened."""
        gate = Gate(timeout)
        with self._lock:
            self._gates[nth] = gate
        return gate

    @property
    def handed_out(self) -> HandedOut:
        """The usage reported by every answer sent in full so far."""
        with self._lock:
            return self._handed

    @property
    def dropped(self) -> int:
        """Answers not sent because their client had gone (a held request whose client died)."""
        with self._lock:
            return self._dropped

    def sent(self, response: Response) -> None:
        """An answer went out in full (called from the server's threads)."""
        if response.usage is not None:
            with self._lock:
                self._handed = self._handed.plus(response.usage)

    def not_sent(self) -> None:
        with self._lock:
            self._dropped += 1

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def completions(self) -> list[RecordedRequest]:
        """The requests that asked a completion endpoint for a turn."""
        return [r for r in self.requests if r.method == "POST" and r.path in self._routes]

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the model server is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def start(self) -> ModelServer:
        if self._httpd is None:
            self._httpd = _Server(("127.0.0.1", 0), _Handler)
            self._httpd.owner = self
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        with self._lock:
            gates = list(self._gates.values())
        for gate in gates:  # no request stays held past the server
            gate.open()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            if self._thread is not None:
                self._thread.join(timeout=5)
            self._httpd = self._thread = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def handle(self, method: str, target: str, headers: Mapping[str, str], raw: bytes) -> Response:
        """Record one request and answer it (called from the server's threads)."""
        path = target.split("?", 1)[0]
        request = RecordedRequest(method, path, dict(headers), _parse_json(raw), raw)
        with self._lock:
            self._requests.append(request)
        if method == "HEAD":  # a reachability probe
            return Response(200, headers={"content-type": "application/json"})
        if method == "GET" and path == "/v1/models":
            return json_response(200, _model_list(self.models))
        dialect = self._routes.get(path) if method == "POST" else None
        if dialect is None:
            error = {"message": f"no route for {method} {path}", "type": "invalid_request_error"}
            return json_response(404, {"error": {**error, "param": None, "code": "not_found"}})
        if request.body is None:
            return dialect.render_error(HttpError(400, "other", "body is not JSON"), request)
        with self._lock:
            entry = self._script.popleft() if self._script else self.when_exhausted
            self._served += 1
            seq = self._served
            gate = self._gates.get(seq)
        if gate is not None:
            gate.reached.set()
            gate.opened.wait(gate.timeout)
        if entry is None:
            message = f"script exhausted: turn {seq} was requested but only {seq - 1} were scripted"
            return dialect.render_error(HttpError(500, "server", message), request)
        turn = entry if isinstance(entry, Turn) else entry(request)
        if turn.delay_seconds:
            time.sleep(turn.delay_seconds)
        if turn.error is not None:
            return dialect.render_error(turn.error, request)
        return dialect.render(turn, request, seq)


def _model_list(models: Sequence[str]) -> dict[str, Any]:
    """One listing both OpenAI (``object``, ``owned_by``) and Anthropic (``type``,
    ``display_name``, ``has_more``) clients read: each ignores the other's fields."""
    data = [
        {
            "id": name,
            "object": "model",
            "created": CREATED,
            "owned_by": "assay-tests",
            "type": "model",
            "display_name": name,
            "created_at": "2023-11-14T22:13:20Z",
        }
        for name in models
    ]
    first, last = (models[0], models[-1]) if models else (None, None)
    return {"object": "list", "data": data, "has_more": False, "first_id": first, "last_id": last}


def _parse_json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _peer_gone(connection: socket.socket) -> bool:
    """Whether the client closed its end (a request is never followed by more data, so a
    readable socket that reads nothing is a client that left)."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ModelServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive for JSON answers; streams close when done
    server: _Server

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        return

    def _serve(self, method: str) -> None:
        raw = self._read_body()
        headers = {name.lower(): value for name, value in self.headers.items()}
        owner = self.server.owner
        response = owner.handle(method, self.path, headers, raw)
        if _peer_gone(self.connection):  # nobody left to read it: not handed out
            owner.not_sent()
            self.close_connection = True
            return
        try:
            self.send_response(response.status)
            for name, value in response.headers.items():
                self.send_header(name, value)
            if response.events is None:
                self.send_header("content-length", str(len(response.body)))
                self.end_headers()
                if method != "HEAD":
                    self.wfile.write(response.body)
                    self.wfile.flush()
                    owner.sent(response)
                return
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True
            for event in response.events:
                self.wfile.write(event)
                self.wfile.flush()
            owner.sent(response)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""
