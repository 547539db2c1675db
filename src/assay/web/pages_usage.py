"""The usage page: ``/usage`` (charts per UTC day and per coder, each with its figures) and
``/usage.json`` (the same figures for scripts; ``/usage?format=json`` too).

The range is in the URL (``?since=2026-11-01&until=2026-11-30``, default the last 30 days);
a value the page cannot show is a 400 page (or a JSON error for the JSON form). GET only,
behind the same credentials as every page (:mod:`assay.web.security`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from assay.web import view_usage_page
from assay.web.config import WebConfig
from assay.web.rendering import render
from assay.web.usage_query import BadQuery, UsageQuery

router = APIRouter()


def _query(request: Request, *, json_form: bool) -> UsageQuery | Response:
    params = dict(request.query_params)
    if json_form:
        params["format"] = "json"
    try:
        return UsageQuery.of(params, datetime.now(UTC).date())
    except BadQuery as exc:
        if json_form or params.get("format") == "json":
            return JSONResponse({"error": str(exc)}, status_code=400)
        return render(
            request,
            "message.html",
            {"title": "Bad request", "message": str(exc), "back": "/usage"},
            400,
        )


def _shown(request: Request, *, json_form: bool) -> Response:
    query = _query(request, json_form=json_form)
    if isinstance(query, Response):
        return query
    config: WebConfig = request.app.state.config
    if query.format == "json":
        usage = view_usage_page.read(config.ledger, query)
        return JSONResponse(view_usage_page.as_json(query, usage))
    page = view_usage_page.usage_page(config.ledger, query)
    return render(request, "usage.html", {"page": page, "nav": "usage"})


@router.get("/usage")
def usage(request: Request) -> Response:
    return _shown(request, json_form=False)


@router.get("/usage.json")
def usage_json(request: Request) -> Response:
    return _shown(request, json_form=True)
