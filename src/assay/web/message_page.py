"""A self-contained page: what the security middleware and the login routes answer with
before any template is in reach."""

from __future__ import annotations

from html import escape

from fastapi.responses import HTMLResponse


def page(status: int, title: str, body_html: str) -> HTMLResponse:
    """A self-contained page (the middleware answers before any template is in reach)."""
    html = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{escape(title)} · assay</title>"
        '<link rel=stylesheet href="/static/app.css"></head>'
        f"<body><main class=message><h1>{escape(title)}</h1>{body_html}"
        '<p><a href="/">Back to the queue</a></p></main></body></html>'
    )
    return HTMLResponse(html, status_code=status)
