"""Who may read the dashboard and who may act through it.

One ASGI middleware, so no route can forget a rule:

- a credential on every request but ``/login`` and ``/static``, on every bind, loopback
  included: a login session (the ``assay_session`` cookie, see :mod:`assay.web.auth`) or
  ``Authorization: Bearer <token>``; otherwise 401 with a login form. With ``anonymous_read``
  (loopback only) a GET needs none, an action still does. The credential's name is
  ``request.state.actor``: who the ledger says acted;
- a loopback dashboard answers only under the names 127.0.0.1, localhost and ::1 (DNS
  rebinding would otherwise make a hostile page's script a local reader);
- CSRF: a POST in a browser session carries a ``csrf`` form field equal to the ``assay_csrf``
  cookie (set on any response to a request without one; ``request.state.csrf`` for the
  templates) and comes from this server's own origin. Pages send no referrer, so a browser's
  same-origin POST says ``Origin: null``: then ``Sec-Fetch-Site: same-origin`` must vouch for
  it. A Bearer request is exempt (no browser adds that header on its own);
- every response says: never frame me, run only my own scripts, no referrer, no sniffing;
  pages are not cached.

A refusal is 401/403 and nothing runs. It also keeps the config on ``app.state.config``.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from html import escape
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fastapi import FastAPI

from assay.web.auth import SESSION_COOKIE, Credential, Sessions
from assay.web.config import LOOPBACK_HOSTS, WebConfig
from assay.web.message_page import page
from assay.web.tokens import TokenError

CSRF_COOKIE = "assay_csrf"
CSRF_FIELD = "csrf"
# Every other method (POST, and any a later route might take) passes the CSRF and origin rules.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
OPEN_PATHS = frozenset({"/login"})
OPEN_PREFIX = "/static/"
# The actions' forms are a few short fields; a bigger body is not one of them.
MAX_FORM_BYTES = 64 * 1024

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; "
    "object-src 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = tuple(
    (name.encode(), value.encode())
    for name, value in (
        ("content-security-policy", CONTENT_SECURITY_POLICY),
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-resource-policy", "same-origin"),
    )
)
NO_STORE = (b"cache-control", b"no-store")

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def install(app: FastAPI, config: WebConfig) -> None:
    """Guard every route of ``app`` by ``config``'s credentials and the CSRF/origin rules."""
    from assay.web import login

    app.state.config = config
    app.state.sessions = Sessions()
    app.include_router(login.router)
    app.add_middleware(Guard, config=config, sessions=app.state.sessions)


class Guard:
    """The middleware (pure ASGI: a streamed ``/events`` response passes through untouched)."""

    def __init__(self, app: ASGIApp, config: WebConfig, sessions: Sessions) -> None:
        self.app = app
        self.config = config
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        send = _with_security_headers(send, cached=path.startswith(OPEN_PREFIX))
        headers = _headers(scope)
        cookies = _cookies(headers.get("cookie", ""))
        csrf = cookies.get(CSRF_COOKIE) or ""
        fresh = None if _plausible(csrf) else secrets.token_urlsafe(32)
        state = scope.setdefault("state", {})
        state["csrf"] = fresh or csrf
        send = _with_csrf_cookie(send, fresh)

        if self.config.loopback and not _loopback_name(headers):
            only_here = f"<p>This dashboard answers on {escape(self.config.host)} only.</p>"
            await page(403, "Refused", only_here)(scope, receive, send)
            return
        credential, bearer = self._credential(headers, cookies)
        state["credential"] = credential
        state["actor"] = credential.name if credential else None
        safe = scope.get("method") in SAFE_METHODS
        open_path = path in OPEN_PATHS or path.startswith(OPEN_PREFIX)
        if credential is None and not open_path and not (safe and self.config.anonymous_read):
            from assay.web.login import login_form

            query = scope.get("query_string", b"").decode("latin-1")
            wanted = f"{path}?{query}" if query and safe else path if safe else "/"
            form = login_form(fresh or csrf, wanted, read_only=self.config.anonymous_read)
            await page(401, "Token required", form)(scope, receive, send)
            return
        if not safe and not bearer:
            refusal = _origin_refusal(headers)
            if refusal is None:
                body, refusal = await _read_form(receive, headers, csrf if fresh is None else "")
                if refusal is None:
                    receive = _replay(body, receive)
            if refusal is not None:
                await page(403, "Refused", f"<p>{escape(refusal)}</p>")(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _credential(
        self, headers: dict[str, str], cookies: dict[str, str]
    ) -> tuple[Credential | None, bool]:
        """Who this request is (None: nobody), and whether by a Bearer header."""
        credentials = self.config.credentials
        auth = headers.get("authorization", "")
        try:
            if auth[:7].lower() == "bearer ":
                return credentials.match(auth[7:].strip()), True
            found = self.sessions.find(cookies.get(SESSION_COOKIE, ""))
            if found is not None and not credentials.valid(found):
                return None, False  # its token was removed: the session ends with it
        except TokenError as exc:  # the token file went bad while serving: nobody gets in
            log.warning("dashboard: %s", exc)
            return None, False
        return found, False


def _origin_refusal(headers: dict[str, str]) -> str | None:
    """Why this POST does not come from the dashboard's own pages, or None when it does."""
    fetch_site = headers.get("sec-fetch-site", "").lower()
    if fetch_site and fetch_site != "same-origin":
        # "same-site" too: a page on another port of this host is the same site.
        return "This request came from another site; nothing was done."
    host = headers.get("host", "").lower()
    source = headers.get("origin") or headers.get("referer") or ""
    if source and source != "null":
        if urlsplit(source).netloc.lower() != host:
            return "This request came from another origin; nothing was done."
        return None
    if fetch_site == "same-origin":
        return None  # Origin: null because the page sends no referrer; the browser vouches
    return "This request says no origin; nothing was done. Use the dashboard's own forms."


async def _read_form(
    receive: Receive, headers: dict[str, str], cookie: str
) -> tuple[bytes, str | None]:
    """The whole body (bounded) and why its ``csrf`` field is refused, if it is."""
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"", "The request ended early; nothing was done."
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            return b"", "The form is too large; nothing was done."
        chunks.append(chunk)
        more = message.get("more_body", False)
    body = b"".join(chunks)
    kind = headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        return body, "The dashboard takes its own forms only; nothing was done."
    fields = parse_qs(body.decode("latin-1"), keep_blank_values=True)
    given = (fields.get(CSRF_FIELD) or [""])[0]
    if not cookie or not hmac.compare_digest(given.encode(), cookie.encode()):
        return (
            body,
            "This form's security check failed (reload the page and try again); nothing was done.",
        )
    return body, None


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body already read, once; then the client's own messages (its disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _with_security_headers(send: Send, *, cached: bool) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            kept = [
                (name, value)
                for name, value in message.get("headers", [])
                if name.lower() not in _OURS and (cached or name.lower() != NO_STORE[0])
            ]
            message["headers"] = [*kept, *SECURITY_HEADERS, *([] if cached else [NO_STORE])]
        await send(message)

    return sending


_OURS = frozenset(name for name, _ in SECURITY_HEADERS)


def _with_csrf_cookie(send: Send, fresh: str | None) -> Send:
    if fresh is None:
        return send
    cookie = f"{CSRF_COOKIE}={fresh}; Path=/; SameSite=Strict; HttpOnly"

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), (b"set-cookie", cookie.encode())]
        await send(message)

    return sending


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _cookies(raw: str) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # a malformed Cookie header is no cookie, never a 500
        return {}
    return {name: morsel.value for name, morsel in jar.items()}


def _plausible(csrf: str) -> bool:
    return 20 <= len(csrf) <= 100 and csrf.replace("-", "").replace("_", "").isalnum()


def _loopback_name(headers: dict[str, str]) -> bool:
    return _hostname(headers.get("host", "").lower()) in LOOPBACK_HOSTS


def _hostname(host: str) -> str:
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host
