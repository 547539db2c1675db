"""The dashboard as one FastAPI application: the pages, the actions, the live event stream.

``create_app`` is all a server needs; it guards every route with ``security.install`` and turns
every error into the message page (a 404, a bad query, a failure reading the ledger), never a
traceback.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from assay.web import actions, live, pages, pages_logs, pages_usage, security
from assay.web.config import WebConfig
from assay.web.rendering import TEMPLATES, render

STATIC = TEMPLATES.parent / "static"
log = logging.getLogger(__name__)


def create_app(config: WebConfig) -> FastAPI:
    app = FastAPI(title="assay", docs_url=None, redoc_url=None, openapi_url=None)
    app.include_router(pages.router)
    app.include_router(pages_logs.router)
    app.include_router(pages_usage.router)
    app.include_router(actions.router)
    app.include_router(live.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _bad_request)
    app.add_exception_handler(Exception, _internal_error)
    security.install(app, config)
    return app


_TITLES = {404: "Not found", 405: "Not allowed", 400: "Bad request"}


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    title = _TITLES.get(exc.status_code, f"Error {exc.status_code}")
    message = exc.detail if isinstance(exc.detail, str) else title
    if exc.status_code == 404 and message == "Not Found":
        message = f"There is no page at {request.url.path}."
    return render(
        request, "message.html", {"title": title, "message": message, "back": "/"}, exc.status_code
    )


async def _bad_request(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    problems = "; ".join(
        f"{'.'.join(str(p) for p in error.get('loc', ())[1:]) or 'input'}: {error.get('msg')}"
        for error in exc.errors()
    )
    return render(
        request,
        "message.html",
        {"title": "Bad request", "message": problems or "The request is not valid.", "back": "/"},
        400,
    )


async def _internal_error(request: Request, exc: Exception) -> Response:
    # Logged with its traceback for the operator's terminal; the page says only what failed.
    log.exception("dashboard: %s %s failed", request.method, request.url.path)
    return render(
        request,
        "message.html",
        {
            "title": "Something went wrong",
            "message": f"The dashboard could not build this page ({type(exc).__name__}); "
            "the server's log has the details.",
            "back": "/",
        },
        500,
    )
