"""The dashboard's guard: a credential on every bind, login sessions, the CSRF field and
cookie, same-origin POSTs, and the headers every response carries.

The guard is exercised on a small app of its own (a GET page and a POST that records who ran
it), so each rule is seen alone; test_actions checks the real actions behind it.
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
from support.dashboard import BASE, OPERATOR, TOKEN, credentials, log_in

from assay.adapters.store.sql import Ledger
from assay.web import security
from assay.web.auth import Credentials
from assay.web.config import WebConfig
from assay.web.tokens import TokenStore


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ledger]:
    path: Path = tmp_path_factory.mktemp("security") / "assay.db"
    ledger = Ledger.open(f"sqlite:///{path}")
    yield ledger
    ledger.close()


@pytest.fixture
def store(tmp_path: Path) -> TokenStore:
    credentials(tmp_path / "config")
    return TokenStore(tmp_path / "config")


def make_app(ledger: Ledger, store: TokenStore, **config: Any) -> tuple[FastAPI, list[str]]:
    ran: list[str] = []
    app = FastAPI()

    @app.get("/page", response_class=PlainTextResponse)
    async def page(request: Request) -> str:
        return f"csrf={request.state.csrf} actor={request.state.actor}"

    @app.post("/act", response_class=PlainTextResponse)
    async def act(request: Request) -> str:
        form = await request.form()
        ran.append(f"{form.get('what', '')} by {request.state.actor}")
        return "done"

    config.setdefault("credentials", Credentials.of(store))
    security.install(app, WebConfig(ledger=ledger, **config))
    return app, ran


def client(app: FastAPI, base: str = BASE, *, logged_in: bool = True) -> TestClient:
    c = TestClient(app, base_url=base, follow_redirects=False)
    if logged_in:
        log_in(c)
    return c


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


# -- a credential on every bind -------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "base"), [("127.0.0.1", BASE), ("::1", "http://[::1]:8765"), ("0.0.0.0", BASE)]
)
def test_without_a_credential_nothing_is_shown_nor_done_on_any_bind(
    ledger: Ledger, store: TokenStore, host: str, base: str
) -> None:
    app, ran = make_app(ledger, store, host=host)
    c = client(app, base, logged_in=False)
    refused = c.get("/page")
    assert refused.status_code == 401
    assert 'action="/login"' in refused.text and "assay token add" in refused.text
    csrf = c.cookies[security.CSRF_COOKIE]  # what the hostile process takes from the form
    forged = post(c, csrf=csrf, origin=base)
    assert forged.status_code == 401 and ran == []


def test_a_dashboard_with_no_credential_at_all_lets_nobody_in(ledger: Ledger) -> None:
    app, ran = make_app(ledger, TokenStore(Path("/nonexistent")), credentials=Credentials())
    c = client(app, logged_in=False)
    assert c.get("/page").status_code == 401
    assert c.get("/login", params={"token": ""}).status_code == 401
    assert post(c, csrf=c.cookies[security.CSRF_COOKIE]).status_code == 401 and ran == []


def test_a_bearer_token_works_for_scripts_and_names_the_actor(
    ledger: Ledger, store: TokenStore
) -> None:
    app, ran = make_app(ledger, store)
    c = client(app, logged_in=False)
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    shown = c.get("/page", headers=bearer)
    assert shown.status_code == 200 and f"actor={OPERATOR}" in shown.text
    assert c.get("/page", headers={"Authorization": "Bearer nope"}).status_code == 401
    # No CSRF cookie, no Origin: a browser never sends that header on its own, a script does.
    done = c.post("/act", data={"what": "scripted"}, headers=bearer)
    assert done.status_code == 200 and ran == [f"scripted by {OPERATOR}"]


def test_anonymous_reading_opens_the_pages_never_the_actions(
    ledger: Ledger, store: TokenStore
) -> None:
    app, ran = make_app(ledger, store, anonymous_read=True)
    c = client(app, logged_in=False)
    shown = c.get("/page")
    assert shown.status_code == 200 and "actor=None" in shown.text
    refused = post(c, csrf=c.cookies[security.CSRF_COOKIE])
    assert refused.status_code == 401 and ran == []
    log_in(c)
    assert post(c, csrf=c.cookies[security.CSRF_COOKIE]).status_code == 200
    assert ran == [f"it by {OPERATOR}"]


def test_anonymous_reading_is_for_loopback_only(ledger: Ledger) -> None:
    with pytest.raises(ValueError, match="loopback"):
        WebConfig(ledger=ledger, host="0.0.0.0", anonymous_read=True)


# -- login sessions -------------------------------------------------------------------------


def test_login_by_query_opens_a_session_and_goes_back_to_a_local_page(
    ledger: Ledger, store: TokenStore
) -> None:
    app, _ = make_app(ledger, store)
    c = client(app, logged_in=False)
    wrong = c.get("/login", params={"token": "nope"})
    assert wrong.status_code == 401 and security.SESSION_COOKIE not in c.cookies
    done = c.get("/login", params={"token": TOKEN, "next": "/page"})
    assert done.status_code == 303 and done.headers["location"] == "/page"  # token left the URL
    cookie = done.headers["set-cookie"]
    assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
    assert TOKEN not in cookie  # a session id, not the token itself
    assert f"actor={OPERATOR}" in c.get("/page").text
    for away in ("//evil.example/x", "http://evil.example/", "/\\evil.example", "javascript:x"):
        assert c.get("/login", params={"token": TOKEN, "next": away}).headers["location"] == "/"


def test_login_by_form_is_a_guarded_post_too(ledger: Ledger, store: TokenStore) -> None:
    app, _ = make_app(ledger, store)
    c = client(app, logged_in=False)
    csrf = csrf_of(c)
    forged = c.post("/login", data={"token": TOKEN}, headers={"Origin": "http://evil.example"})
    assert forged.status_code == 403 and security.SESSION_COOKIE not in c.cookies
    done = c.post(
        "/login", data={"token": TOKEN, "next": "/page", "csrf": csrf}, headers={"Origin": BASE}
    )
    assert done.status_code == 303 and c.get("/page").status_code == 200


def test_a_removed_token_ends_its_sessions_at_once(ledger: Ledger, store: TokenStore) -> None:
    app, _ = make_app(ledger, store)
    c = client(app)
    assert c.get("/page").status_code == 200
    store.remove(OPERATOR)
    assert c.get("/page").status_code == 401
    store.add(OPERATOR)  # a new secret under the old name does not revive the old session
    assert c.get("/page").status_code == 401


def test_logout_ends_the_session(ledger: Ledger, store: TokenStore) -> None:
    app, _ = make_app(ledger, store)
    c = client(app)
    session = c.cookies[security.SESSION_COOKIE]
    out = c.post("/logout", data={"csrf": csrf_of(c)}, headers={"Origin": BASE})
    assert out.status_code == 303
    again = TestClient(app, base_url=BASE, cookies={security.SESSION_COOKIE: session})
    assert again.get("/page", follow_redirects=False).status_code == 401


def test_a_token_made_while_serving_works_without_a_restart(
    ledger: Ledger, store: TokenStore
) -> None:
    app, _ = make_app(ledger, store)
    c = client(app, logged_in=False)
    _, secret = store.add("grace")
    assert "actor=grace" in c.get("/page", headers={"Authorization": f"Bearer {secret}"}).text


# -- CSRF and origin ------------------------------------------------------------------------


def test_a_get_sets_the_csrf_cookie_once_and_gives_it_to_the_page(
    ledger: Ledger, store: TokenStore
) -> None:
    app, _ = make_app(ledger, store)
    c = client(app)
    c.cookies.delete(security.CSRF_COOKIE)
    first = c.get("/page")
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    token = c.cookies[security.CSRF_COOKIE]
    assert first.text.startswith(f"csrf={token} ")
    again = c.get("/page")
    assert "set-cookie" not in again.headers and again.text.startswith(f"csrf={token} ")


def test_a_same_origin_post_with_the_csrf_field_runs(ledger: Ledger, store: TokenStore) -> None:
    app, ran = make_app(ledger, store)
    c = client(app)
    done = post(c, csrf=csrf_of(c))
    assert done.status_code == 200 and ran == [f"it by {OPERATOR}"]


def test_a_browser_post_under_no_referrer_is_vouched_for_by_sec_fetch_site(
    ledger: Ledger, store: TokenStore
) -> None:
    # Pages say Referrer-Policy: no-referrer, so a browser's own form POST says Origin: null.
    app, ran = make_app(ledger, store)
    c = client(app)
    csrf = csrf_of(c)
    assert post(c, csrf=csrf, origin="null", **{"Sec-Fetch-Site": "same-origin"}).status_code == 200
    assert post(c, csrf=csrf, origin="null").status_code == 403
    assert len(ran) == 1


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
        ("another port's page", {"Sec-Fetch-Site": "same-site", "origin": "null"}, "another site"),
    ],
)
def test_a_forged_post_is_refused_403_and_nothing_runs(
    ledger: Ledger, store: TokenStore, case: str, headers: dict[str, str | None], says: str
) -> None:
    app, ran = make_app(ledger, store)
    c = client(app)
    kwargs: dict[str, Any] = {"csrf": csrf_of(c), **headers}
    refused = post(c, **kwargs)
    assert refused.status_code == 403, case
    assert says in refused.text and "nothing was done" in refused.text
    assert ran == []


def test_other_unsafe_methods_pass_the_same_rules(ledger: Ledger, store: TokenStore) -> None:
    app, ran = make_app(ledger, store)
    c = client(app)
    csrf_of(c)
    refused = c.request("DELETE", "/act", headers={"Origin": "http://evil.example"})
    assert refused.status_code == 403 and ran == []


def test_a_referer_stands_for_a_missing_origin(ledger: Ledger, store: TokenStore) -> None:
    app, ran = make_app(ledger, store)
    c = client(app)
    csrf = csrf_of(c)
    assert post(c, csrf=csrf, origin=None, Referer=f"{BASE}/page").status_code == 200
    assert post(c, csrf=csrf, origin=None, Referer="http://evil.example/").status_code == 403
    assert len(ran) == 1


def test_a_post_without_the_csrf_cookie_is_refused_even_with_a_field(
    ledger: Ledger, store: TokenStore
) -> None:
    app, ran = make_app(ledger, store)
    c = client(app)
    c.cookies.delete(security.CSRF_COOKIE)
    refused = post(c, csrf="a" * 43)  # whatever the page said: no cookie to match
    assert refused.status_code == 403 and ran == []


def test_a_non_form_body_is_refused(ledger: Ledger, store: TokenStore) -> None:
    app, ran = make_app(ledger, store)
    c = client(app)
    csrf = csrf_of(c)
    refused = c.post("/act", json={"csrf": csrf}, headers={"Origin": BASE})
    assert refused.status_code == 403 and "own forms" in refused.text and ran == []


def test_an_oversized_form_is_refused(ledger: Ledger, store: TokenStore) -> None:
    app, ran = make_app(ledger, store)
    c = client(app)
    csrf = csrf_of(c)
    big = {"csrf": csrf, "what": "x" * (security.MAX_FORM_BYTES + 1)}
    refused = c.post("/act", data=big, headers={"Origin": BASE})
    assert refused.status_code == 403 and "too large" in refused.text and ran == []


def test_a_loopback_dashboard_answers_only_to_its_own_names(
    ledger: Ledger, store: TokenStore
) -> None:
    # DNS rebinding: evil.example resolving to 127.0.0.1 makes Origin and Host agree.
    app, ran = make_app(ledger, store, anonymous_read=True)
    evil = client(app, "http://evil.example:8765", logged_in=False)
    assert evil.get("/page").status_code == 403
    refused = post(evil, csrf="x" * 43, origin="http://evil.example:8765")
    assert refused.status_code == 403 and ran == []
    for name in ("http://localhost:8765", "http://[::1]:8765", BASE):
        assert client(app, name, logged_in=False).get("/page").status_code == 200


def test_a_malformed_cookie_header_is_no_cookie_not_an_error(
    ledger: Ledger, store: TokenStore
) -> None:
    app, _ = make_app(ledger, store, anonymous_read=True)
    c = client(app, logged_in=False)
    page = c.get("/page", headers={"Cookie": 'assay_csrf="\\x00; ;;=='})
    assert page.status_code == 200 and "set-cookie" in page.headers


# -- headers on every response --------------------------------------------------------------


def test_every_response_forbids_framing_inline_scripts_sniffing_and_referrers(
    ledger: Ledger, store: TokenStore
) -> None:
    app, _ = make_app(ledger, store)
    c = client(app)
    answers: dict[str, Any] = {
        "page": c.get("/page"),
        "401": client(app, logged_in=False).get("/page"),
        "403": post(c, csrf="wrong" * 9),
        "404": c.get("/nothing"),
        "login": c.get("/login"),
        "redirect": c.get("/login", params={"token": TOKEN}),
    }
    for what, answer in answers.items():
        headers = answer.headers
        assert headers["x-frame-options"] == "DENY", what
        csp = headers["content-security-policy"]
        for rule in (
            "default-src 'self'",
            "frame-ancestors 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "object-src 'none'",
            "script-src 'self'",
        ):
            assert rule in csp, (what, rule)
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp, what
        assert headers["x-content-type-options"] == "nosniff", what
        assert headers["referrer-policy"] == "no-referrer", what
        assert headers["cache-control"] == "no-store", what


def test_a_token_file_gone_bad_while_serving_lets_nobody_in(
    ledger: Ledger, store: TokenStore
) -> None:
    app, _ = make_app(ledger, store)
    c = client(app)
    store.path.chmod(0o666)  # anyone could now add a token of their own: trust none
    assert c.get("/page").status_code == 401
    assert c.get("/page", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 401
    store.path.chmod(0o600)
    assert c.get("/page").status_code == 200
