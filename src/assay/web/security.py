"""Who may read the dashboard and who may act through it.

One ASGI middleware, so no route can forget a rule:

- the token (``WebConfig.token``): when set, every path but ``/login`` and ``/static`` needs it,
  as the ``assay_token`` cookie or ``Authorization: Bearer``; otherwise 401 with a login form;
- CSRF: every POST carries a ``csrf`` form field equal to the ``assay_csrf`` cookie (set on any
  response to a request without one, and given to templates as ``request.state.csrf``), comes
  from this server's own origin (``Origin``, else ``Referer``, host:port equal to ``Host``) and
  is not ``Sec-Fetch-Site: cross-site``. A refusal is 403 and nothing runs.

It also keeps the config on ``app.state.config`` for the routers.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from html import escape
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, FastAPI, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from assay.web.config import LOOPBACK_HOSTS, WebConfig

TOKEN_COOKIE = "assay_token"
CSRF_COOKIE = "assay_csrf"
CSRF_FIELD = "csrf"
# Every other method (POST, and any a later route might take) passes the CSRF and origin rules.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
OPEN_PATHS = frozenset({"/login"})
OPEN_PREFIX = "/static/"
# The actions' forms are a few short fields; a bigger body is not one of them.
MAX_FORM_BYTES = 64 * 1024

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

router = APIRouter()


def install(app: FastAPI, config: WebConfig) -> None:
    """Guard every route of ``app`` by ``config``'s token and the CSRF/origin rules."""
    app.state.config = config
    app.include_router(router)
    app.add_middleware(Guard, config=config)


class Guard:
    """The middleware (pure ASGI: a streamed ``/events`` response passes through untouched)."""

    def __init__(self, app: ASGIApp, config: WebConfig) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        cookies = _cookies(headers.get("cookie", ""))
        path: str = scope.get("path", "")
        csrf = cookies.get(CSRF_COOKIE) or ""
        fresh = None if _plausible(csrf) else secrets.token_urlsafe(32)
        scope.setdefault("state", {})["csrf"] = fresh or csrf
        send = _with_csrf_cookie(send, fresh)

        token = self.config.token
        if self.config.loopback and not token and not _loopback_name(headers):
            # An unguarded loopback dashboard reached under another name is DNS rebinding:
            # a hostile page's script reading (or acting) as if it were this machine's own.
            refusal = f"<p>This dashboard answers on {escape(self.config.host)} only.</p>"
            await _page(403, "Refused", refusal)(scope, receive, send)
            return
        open_path = path in OPEN_PATHS or path.startswith(OPEN_PREFIX)
        if token and not open_path and not _authorised(token, headers, cookies):
            query = scope.get("query_string", b"").decode("latin-1")
            login = _login_form(fresh or csrf, f"{path}?{query}" if query else path)
            await _page(401, "Token required", login)(scope, receive, send)
            return
        if scope.get("method") not in SAFE_METHODS:
            refusal = _origin_refusal(headers, self.config)
            if refusal is None:
                body, refusal = await _read_form(receive, headers, csrf if fresh is None else "")
                if refusal is None:
                    receive = _replay(body, receive)
            if refusal is not None:
                await _page(403, "Refused", f"<p>{escape(refusal)}</p>")(scope, receive, send)
                return
        await self.app(scope, receive, send)


@router.get("/login", response_class=HTMLResponse)
async def login_page(
    request: Request, token: str | None = None, next_url: str = Query("/", alias="next")
) -> Response:
    """``/login?token=…`` sets the cookie and goes on; without one, the form."""
    if token is not None:
        return _logged_in(request, token, next_url)
    return _page(200, "Log in", _login_form(request.state.csrf, next_url))


@router.post("/login", response_class=HTMLResponse)
async def login_form(
    request: Request, token: str = Form(""), next_url: str = Form("/", alias="next")
) -> Response:
    return _logged_in(request, token, next_url)


def _logged_in(request: Request, token: str, next_url: str) -> Response:
    config: WebConfig = request.app.state.config
    if config.token and not hmac.compare_digest(token.encode(), config.token.encode()):
        form = _login_form(request.state.csrf, next_url)
        return _page(401, "Wrong token", f"<p>That token is not this dashboard's.</p>{form}")
    response = RedirectResponse(_local(next_url), status_code=303)
    if config.token:
        response.set_cookie(
            TOKEN_COOKIE, token, httponly=True, samesite="strict", secure=False, path="/"
        )
    return response


def _local(url: str) -> str:
    """Only a path on this server: ``next`` must not send a fresh login elsewhere."""
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or not url.startswith("/") or url.startswith("//"):
        return "/"
    return url


def _authorised(token: str, headers: dict[str, str], cookies: dict[str, str]) -> bool:
    given = cookies.get(TOKEN_COOKIE, "")
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        given = auth[7:].strip()
    return bool(given) and hmac.compare_digest(given.encode(), token.encode())


def _origin_refusal(headers: dict[str, str], config: WebConfig) -> str | None:
    """Why this POST does not come from the dashboard's own pages, or None when it does."""
    if headers.get("sec-fetch-site", "").lower() == "cross-site":
        return "This request came from another site; nothing was done."
    host = headers.get("host", "").lower()
    source = headers.get("origin") or headers.get("referer") or ""
    if not source or source == "null":
        return "This request says no origin; nothing was done. Use the dashboard's own forms."
    if urlsplit(source).netloc.lower() != host:
        return "This request came from another origin; nothing was done."
    return None


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


def _with_csrf_cookie(send: Send, fresh: str | None) -> Send:
    if fresh is None:
        return send
    cookie = f"{CSRF_COOKIE}={fresh}; Path=/; SameSite=Strict; HttpOnly"

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), (b"set-cookie", cookie.encode())]
        await send(message)

    return sending


def _page(status: int, title: str, body_html: str) -> HTMLResponse:
    """A self-contained page (the middleware answers before any template is in reach)."""
    html = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{escape(title)} · assay</title>"
        '<link rel=stylesheet href="/static/app.css"></head>'
        f"<body><main class=message><h1>{escape(title)}</h1>{body_html}"
        '<p><a href="/">Back to the queue</a></p></main></body></html>'
    )
    return HTMLResponse(html, status_code=status)


def _login_form(csrf: str, next_url: str) -> str:
    hidden = f'<input type=hidden name=csrf value="{escape(csrf)}">'
    return (
        "<p>This dashboard needs its token (<code>--web-token</code> or "
        "<code>ASSAY_WEB_TOKEN</code> of <code>assay serve</code>).</p>"
        '<form method=post action="/login">'
        f'{hidden}<input type=hidden name=next value="{escape(_local(next_url))}">'
        "<label>Token <input type=password name=token autocomplete=current-password required>"
        "</label> <button type=submit>Log in</button></form>"
    )


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
