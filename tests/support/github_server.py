"""A stand-in for the GitHub pull-request API: a real HTTP server on 127.0.0.1.

It behaves like GitHub for the two calls assay makes (``POST /repos/{o}/{r}/pulls`` and
``GET /repos/{o}/{r}/pulls?head=…``): it checks the bearer token when one is set, creates pull
requests, answers 422 "A pull request already exists" for a second one on the same head, and
404 for anything else. Every call is recorded with its headers and JSON body. A test can put
scripted replies in front (``script(Reply(401, …))``) for the failures GitHub can give.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

HTML_BASE = "https://github.example"


@dataclass(frozen=True)
class Call:
    """One request as the server received it (header names in lower case)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass(frozen=True)
class Reply:
    """A scripted answer, served before the GitHub-like behaviour."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


def rate_limited(reset_epoch: int) -> Reply:
    """GitHub's primary rate limit: 403, no requests left, and the reset time."""
    return Reply(
        403,
        {"message": "API rate limit exceeded for user ID 1."},
        {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset_epoch)},
    )


def secondary_limit(retry_after: int) -> Reply:
    return Reply(
        403,
        {"message": "You have exceeded a secondary rate limit. Please wait a few minutes."},
        {"retry-after": str(retry_after)},
    )


BAD_CREDENTIALS = Reply(401, {"message": "Bad credentials"})


class GitHubServer:
    """Use as a context manager; ``api_base`` is what assay is pointed at."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token
        self.calls: list[Call] = []
        self.pulls: dict[str, list[dict[str, Any]]] = {}
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def api_base(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def add_pull(self, repo: str, head: str, base: str = "main") -> dict[str, Any]:
        """A pull request that is already open (as if made by an earlier run)."""
        with self._lock:
            return self._create(repo, {"head": head, "base": base, "title": "earlier"})

    def posts(self) -> list[Call]:
        return [c for c in self.calls if c.method == "POST"]

    def __enter__(self) -> GitHubServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- behaviour (called with the lock held) ----------------------------------------------

    def _answer(self, call: Call) -> Reply:
        self.calls.append(call)
        if self._script:
            return self._script.popleft()
        expected = f"Bearer {self.token}"
        if self.token is not None and call.headers.get("authorization") != expected:
            return BAD_CREDENTIALS
        # GitHub Enterprise serves the same API under /api/v3.
        parts = call.path.removeprefix("/api/v3").strip("/").split("/")
        if len(parts) != 4 or parts[0] != "repos" or parts[3] != "pulls":
            return Reply(404, {"message": "Not Found"})
        repo = f"{parts[1]}/{parts[2]}"
        if call.method == "GET":
            head = (call.query.get("head") or [""])[0]
            state = (call.query.get("state") or ["open"])[0]
            found = [
                p
                for p in self.pulls.get(repo, [])
                if (not head or p["head"]["label"] == head) and p["state"] == state
            ]
            return Reply(200, found)
        if call.method != "POST" or not isinstance(call.body, dict):
            return Reply(404, {"message": "Not Found"})
        owner = parts[1]
        label = f"{owner}:{call.body.get('head')}"
        if any(p["head"]["label"] == label for p in self.pulls.get(repo, [])):
            return Reply(
                422,
                {
                    "message": "Validation Failed",
                    "errors": [
                        {
                            "resource": "PullRequest",
                            "code": "custom",
                            "message": f"A pull request already exists for {label}.",
                        }
                    ],
                },
            )
        return Reply(201, self._create(repo, call.body))

    def _create(self, repo: str, body: dict[str, Any]) -> dict[str, Any]:
        pulls = self.pulls.setdefault(repo, [])
        number = sum(len(p) for p in self.pulls.values()) + 1
        owner = repo.split("/", 1)[0]
        pull = {
            "number": number,
            "state": "open",
            "url": f"{self.api_base}/repos/{repo}/pulls/{number}",
            "html_url": f"{HTML_BASE}/{repo}/pull/{number}",
            "title": body.get("title"),
            "body": body.get("body"),
            "draft": bool(body.get("draft")),
            "head": {"ref": body.get("head"), "label": f"{owner}:{body.get('head')}"},
            "base": {"ref": body.get("base")},
        }
        pulls.append(pull)
        return pull


def _handler(server: GitHubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            return None

        def _serve(self) -> None:
            split = urlsplit(self.path)
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            call = Call(
                method=self.command,
                path=split.path,
                query=parse_qs(split.query),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
            )
            with server._lock:
                reply = server._answer(call)
            data = json.dumps(reply.body).encode() if reply.body is not None else b""
            self.send_response(reply.status)
            self.send_header("content-type", "application/json; charset=utf-8")
            self.send_header("content-length", str(len(data)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = _serve
        do_POST = _serve

    return Handler
