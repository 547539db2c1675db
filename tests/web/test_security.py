"""The dashboard's guard: the token, the CSRF field and cookie, same-origin POSTs.

The guard is exercised on a small app of its own (a GET page and a POST that records it ran),
so each rule is seen alone; test_actions checks the real actions behind it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse
from fastapi.testclient import TestClient

from assay.adapters.store.sql import Ledger
from assay.web import security
from assay.web.config import WebConfig

BASE = "http://127.0.0.1:8765"
TOKEN = "correct-horse-battery-staple"


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ledger]:
    path: Path = tmp_path_factory.mktemp("security") / "assay.db"
    ledger = Ledger.open(f"sqlite:///{path}")
    yield ledger
    ledger.close()


def make_app(ledger: Ledger, **config: object) -> tuple[FastAPI, list[str]]:
    ran: list[str] = []
    app = FastAPI()

    @app.get("/page", response_class=PlainTextResponse)
    async def page(request: Request) -> str:
        return f"csrf={request.state.csrf}"

    @app.post("/act", response_class=PlainTextResponse)
    async def act(request: Request) -> str:
        form = await request.form()
        ran.append(str(form.get("what", "")))
        return "done"

    security.install(app, WebConfig(ledger=ledger, **config))  # type: ignore[arg-type]
    return app, ran


def client(app: FastAPI, base: str = BASE) -> TestClient:
    return TestClient(app, base_url=base, follow_redirects=False)


def post(
    c: TestClient, *, csrf: str | None = None, origin: str | None = BASE, **headers: str
) -> httpx.Response:
    fields = {"what": "it"}
    if csrf is not None:
        fields["csrf"] = csrf
    if origin is not None:
        headers["Origin"] = origin
    return c.post("/act", data=fields, headers=headers)


def csrf_of(c: TestClient) -> str:
    c.get("/page")
    return c.cookies[security.CSRF_COOKIE]


def test_a_get_sets_the_csrf_cookie_once_and_gives_it_to_the_page(ledger: Ledger) -> None:
    app, _ = make_app(ledger)
    c = client(app)
    first = c.get("/page")
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    token = c.cookies[security.CSRF_COOKIE]
    assert first.text == f"csrf={token}"
    again = c.get("/page")
    assert "set-cookie" not in again.headers and again.text == f"csrf={token}"


def test_a_same_origin_post_with_the_csrf_field_runs(ledger: Ledger) -> None:
    app, ran = make_app(ledger)
    c = client(app)
    done = post(c, csrf=csrf_of(c))
    assert done.status_code == 200 and ran == ["it"]  # the body reached the route intact


@pytest.mark.parametrize(
    ("case", "headers", "says"),
    [
        ("no csrf field", {"csrf": None}, "security check failed"),
        ("a wrong csrf field", {"csrf": "x" * 43}, "security check failed"),
        ("a foreign Origin", {"origin": "http://evil.example"}, "another origin"),
        ("a foreign port", {"origin": "http://127.0.0.1:9999"}, "another origin"),
        ("no Origin nor Referer", {"origin": None}, "no origin"),
        ("Origin null", {"origin": "null"}, "no origin"),
        ("cross-site fetch", {"Sec-Fetch-Site": "cross-site"}, "another site"),
    ],
)
def test_a_forged_post_is_refused_403_and_nothing_runs(
    ledger: Ledger, case: str, headers: dict[str, str | None], says: str
) -> None:
    app, ran = make_app(ledger)
    c = client(app)
    kwargs: dict[str, Any] = {"csrf": csrf_of(c), **headers}
    refused = post(c, **kwargs)
    assert refused.status_code == 403, case
    assert says in refused.text and "nothing was done" in refused.text
    assert ran == []


def test_other_unsafe_methods_pass_the_same_rules(ledger: Ledger) -> None:
    app, ran = make_app(ledger)
    c = client(app)
    csrf_of(c)
    refused = c.request("DELETE", "/act", headers={"Origin": "http://evil.example"})
    assert refused.status_code == 403 and ran == []


def test_a_referer_stands_for_a_missing_origin(ledger: Ledger) -> None:
    app, ran = make_app(ledger)
    c = client(app)
    csrf = csrf_of(c)
    assert post(c, csrf=csrf, origin=None, Referer=f"{BASE}/page").status_code == 200
    assert post(c, csrf=csrf, origin=None, Referer="http://evil.example/").status_code == 403
    assert ran == ["it"]


def test_a_post_without_the_csrf_cookie_is_refused_even_with_a_field(ledger: Ledger) -> None:
    app, ran = make_app(ledger)
    c = client(app)
    refused = post(c, csrf="a" * 43)  # whatever the page said: no cookie to match
    assert refused.status_code == 403 and ran == []


def test_a_non_form_body_is_refused(ledger: Ledger) -> None:
    app, ran = make_app(ledger)
    c = client(app)
    csrf = csrf_of(c)
    refused = c.post("/act", json={"csrf": csrf}, headers={"Origin": BASE})
    assert refused.status_code == 403 and "own forms" in refused.text and ran == []


def test_an_oversized_form_is_refused(ledger: Ledger) -> None:
    app, ran = make_app(ledger)
    c = client(app)
    csrf = csrf_of(c)
    big = {"csrf": csrf, "what": "x" * (security.MAX_FORM_BYTES + 1)}
    refused = c.post("/act", data=big, headers={"Origin": BASE})
    assert refused.status_code == 403 and "too large" in refused.text and ran == []


def test_an_unguarded_loopback_dashboard_answers_only_to_its_own_names(ledger: Ledger) -> None:
    # DNS rebinding: evil.example resolving to 127.0.0.1 makes Origin and Host agree, so a
    # hostile page could read the dashboard (diffs, evidence) or act through it.
    app, ran = make_app(ledger)
    evil = client(app, "http://evil.example:8765")
    assert evil.get("/page").status_code == 403
    refused = post(evil, csrf="x" * 43, origin="http://evil.example:8765")
    assert refused.status_code == 403 and ran == []
    for name in ("http://localhost:8765", "http://[::1]:8765", BASE):
        assert client(app, name).get("/page").status_code == 200


def test_with_a_token_every_page_needs_it(ledger: Ledger) -> None:
    app, _ = make_app(ledger, token=TOKEN)
    c = client(app)
    refused = c.get("/page")
    assert refused.status_code == 401
    assert 'action="/login"' in refused.text and "csrf" in refused.text
    assert "set-cookie" in refused.headers  # the login form's CSRF cookie
    assert c.get("/page", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert c.get("/page", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert c.get("/static/app.css").status_code == 404  # open (and absent here), not 401
    back = c.get("/page", params={"status": "held"})
    assert 'name=next value="/page?status=held"' in back.text  # the login returns there


def test_login_by_query_sets_the_token_cookie_and_goes_back_to_a_local_page(
    ledger: Ledger,
) -> None:
    app, _ = make_app(ledger, token=TOKEN)
    c = client(app)
    wrong = c.get("/login", params={"token": "nope"})
    assert wrong.status_code == 401 and security.TOKEN_COOKIE not in c.cookies
    done = c.get("/login", params={"token": TOKEN, "next": "/page"})
    assert done.status_code == 303 and done.headers["location"] == "/page"
    cookie = done.headers["set-cookie"]
    assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
    assert c.get("/page").status_code == 200
    away = c.get("/login", params={"token": TOKEN, "next": "//evil.example/x"})
    assert away.headers["location"] == "/"


def test_login_by_form_is_a_guarded_post_too(ledger: Ledger) -> None:
    app, _ = make_app(ledger, token=TOKEN)
    c = client(app)
    csrf = csrf_of(c)
    forged = c.post("/login", data={"token": TOKEN}, headers={"Origin": "http://evil.example"})
    assert forged.status_code == 403 and security.TOKEN_COOKIE not in c.cookies
    done = c.post(
        "/login", data={"token": TOKEN, "next": "/page", "csrf": csrf}, headers={"Origin": BASE}
    )
    assert done.status_code == 303 and c.get("/page").status_code == 200


def test_with_a_token_a_post_needs_it_before_anything_else(ledger: Ledger) -> None:
    app, ran = make_app(ledger, token=TOKEN)
    c = client(app)
    refused = post(c, csrf=csrf_of(c))
    assert refused.status_code == 401 and ran == []
    c.get("/login", params={"token": TOKEN})
    assert post(c, csrf=c.cookies[security.CSRF_COOKIE]).status_code == 200 and ran == ["it"]


def test_a_malformed_cookie_header_is_no_cookie_not_an_error(ledger: Ledger) -> None:
    app, _ = make_app(ledger)
    c = client(app)
    page = c.get("/page", headers={"Cookie": 'assay_csrf="\\x00; ;;=='})
    assert page.status_code == 200 and "set-cookie" in page.headers
