"""``/login`` and ``/logout``: a token traded for a login session, and the session ended.

``/login?token=…`` (the URL ``assay serve`` prints) or the login form opens a session and
redirects to ``next`` (a local path only), so the token leaves the address bar at once.
"""

from __future__ import annotations

from html import escape
from urllib.parse import urlsplit

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from assay.web.auth import SESSION_COOKIE, Sessions
from assay.web.config import WebConfig
from assay.web.message_page import page

router = APIRouter()


@router.get("/login", response_class=HTMLResponse)
async def login_page(
    request: Request, token: str | None = None, next_url: str = Query("/", alias="next")
) -> Response:
    """``/login?token=…`` opens a session and goes on; without one, the form."""
    if token is not None:
        return _logged_in(request, token, next_url)
    config: WebConfig = request.app.state.config
    form = login_form(request.state.csrf, next_url, read_only=config.anonymous_read)
    return page(200, "Log in", form)


@router.post("/login", response_class=HTMLResponse)
async def login_posted(
    request: Request, token: str = Form(""), next_url: str = Form("/", alias="next")
) -> Response:
    return _logged_in(request, token, next_url)


@router.post("/logout")
async def logout(request: Request) -> Response:
    sessions: Sessions = request.app.state.sessions
    sessions.close(request.cookies.get(SESSION_COOKIE, ""))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


def _logged_in(request: Request, token: str, next_url: str) -> Response:
    config: WebConfig = request.app.state.config
    credential = config.credentials.match(token.strip())
    if credential is None:
        form = login_form(request.state.csrf, next_url, read_only=config.anonymous_read)
        return page(401, "Wrong token", f"<p>That is not a token of this dashboard.</p>{form}")
    sessions: Sessions = request.app.state.sessions
    response = RedirectResponse(local(next_url), status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        sessions.open(credential),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


def local(url: str) -> str:
    """Only a path on this server: ``next`` must not send a fresh login elsewhere."""
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or not url.startswith("/") or url.startswith("//"):
        return "/"
    if "\\" in url or any(ord(c) < 0x20 for c in url):
        return "/"  # browsers read "/\\evil.example" as another host
    return url


def login_form(csrf: str, next_url: str, *, read_only: bool = False) -> str:
    hidden = f'<input type=hidden name=csrf value="{escape(csrf)}">'
    anonymous = "<p>Reading is open on this machine; acting needs a token.</p>" if read_only else ""
    return (
        f"{anonymous}<p>Log in with a dashboard token: open the login URL <code>assay serve"
        "</code> printed, or make a token with <code>assay token add NAME</code> and paste it "
        "here (scripts: <code>Authorization: Bearer TOKEN</code>).</p>"
        '<form method=post action="/login">'
        f'{hidden}<input type=hidden name=next value="{escape(local(next_url))}">'
        "<label>Token <input type=password name=token autocomplete=current-password required>"
        "</label> <button type=submit>Log in</button></form>"
    )
