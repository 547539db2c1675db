"""The dashboard's templates and the one way every page is rendered.

``render`` gives each template the request, the CSRF token the security middleware chose for
this request (the hidden field of every form), who is logged in (``actor``; None: an anonymous
reader, shown no forms), the banner of a known ``?notice=`` code and the config, so no route
can forget them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from assay.web import views
from assay.web.config import WebConfig
from assay.web.format import FILTERS
from assay.web.notices import notice_text

TEMPLATES = Path(__file__).with_name("templates")

templates = Jinja2Templates(directory=str(TEMPLATES))
templates.env.filters.update(FILTERS)
# The server's clock, for clock.js to tick relative times by it rather than the browser's.
templates.env.globals["server_now"] = lambda: datetime.now(UTC).isoformat()
# A missing attribute is a bug in a template, not an empty string on a page.
templates.env.undefined = jinja2.StrictUndefined


def render(
    request: Request, name: str, context: dict[str, Any], status_code: int = 200
) -> HTMLResponse:
    """``name`` rendered with ``context`` plus ``request``, ``csrf``, ``actor``, ``notice``
    and ``config``."""
    state = request.state
    config = getattr(request.app.state, "config", None)
    # Only a whole page's navigation shows it: a fragment (``_x.html``, refreshed on every
    # live event) never pays for the count.
    page = not name.startswith("_")
    if page and "needs_you" not in context and config is not None and status_code < 500:
        context = {**context, "needs_you": _needs_you(config)}
    full = {
        **context,
        "csrf": getattr(state, "csrf", ""),
        "actor": getattr(state, "actor", None),
        "config": getattr(request.app.state, "config", None),
        "notice": notice_text(request.query_params.get("notice")),
    }
    return templates.TemplateResponse(request, name, full, status_code=status_code)


def _needs_you(config: WebConfig) -> int | None:
    """The held and failed tasks, for the navigation; None when the ledger cannot say (the
    page still renders: it may be the page that says the ledger is down)."""
    try:
        return views.needs_you(config.ledger)
    except Exception:
        return None
