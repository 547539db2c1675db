"""The log view: one of a run's logs, or one long text of a task or run, shown whole.

``/runs/{run}/logs/{name}`` shows a log the ledger keeps (its ANSI colours rendered, its lines
numbered, a search box); ``/tasks/{task}/text/{field}`` and ``/runs/{run}/text/{field}`` show
a text a page cut (a hold reason, a last error, a coder's summary). ``?download=1`` sends the
text as it is kept, as a ``text/plain`` attachment. GET only, behind the same credentials as
every page (:mod:`assay.web.security`).
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from assay.adapters.store.sql import Ledger
from assay.web import view_logs
from assay.web.config import WebConfig
from assay.web.format import size_text
from assay.web.rendering import render

router = APIRouter()


def _ledger(request: Request) -> Ledger:
    config: WebConfig = request.app.state.config
    return config.ledger


def _shown(
    request: Request, page: view_logs.LogPage | None, download: bool, missing: str, back: str
) -> Response:
    if page is None:
        return render(
            request,
            "message.html",
            {"title": "Not found", "message": missing, "back": back},
            404,
        )
    if download:
        return Response(
            page.text,
            media_type="text/plain; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{page.download}"'},
        )
    return render(request, "log.html", {"log": page})


@router.get("/runs/{run_id}/logs/{name:path}")
def run_log(request: Request, run_id: str, name: str, download: bool = False) -> Response:
    page = view_logs.log_page(_ledger(request), run_id, name)
    missing = f"The ledger keeps no log {name!r} of run {run_id!r}."
    return _shown(request, page, download, missing, f"/runs/{quote(run_id, safe='')}")


@router.get("/fragments/runs/{run_id}/logs/{name:path}")
def run_log_update(
    request: Request,
    run_id: str,
    name: str,
    length: Annotated[int, Query(ge=0, le=1 << 40)] = 0,
    sig: Annotated[str, Query(max_length=64)] = "",
) -> Response:
    """What a log view showing ``length`` characters signed ``sig`` must change (log.js
    follows a log while its run is open): JSON, its lines as escaped HTML (see
    :class:`view_logs.LogUpdate`); 404 when the log is gone."""
    page = view_logs.log_page(_ledger(request), run_id, name)
    if page is None:
        return JSONResponse({"error": f"no log {name!r} of run {run_id!r}"}, status_code=404)
    update = view_logs.log_update(page, length, sig)
    return JSONResponse(
        {
            "start": update.start,
            "lines": [str(line) for line in update.lines],
            "total": update.total,
            "length": update.length,
            "sig": update.sig,
            "live": update.live,
            "note": update.note,
            # The header's figures: the file's size, and when this copy was kept.
            "size": size_text(page.size).replace("characters", "bytes"),
            "kept": page.updated_at.isoformat() if page.updated_at else None,
        },
        headers={"Cache-Control": "no-store"},
    )


@router.get("/runs/{run_id}/text/{field}")
def run_text(request: Request, run_id: str, field: str, download: bool = False) -> Response:
    config: WebConfig = request.app.state.config
    page = view_logs.run_text(config.ledger, run_id, field, config.state_dir)
    missing = f"Run {run_id!r} has no {field!r} to show."
    return _shown(request, page, download, missing, f"/runs/{quote(run_id, safe='')}")


@router.get("/tasks/{task_id}/text/{field}")
def task_text(request: Request, task_id: str, field: str, download: bool = False) -> Response:
    page = view_logs.task_text(_ledger(request), task_id, field)
    missing = f"Task {task_id!r} has no {field!r} to show."
    return _shown(request, page, download, missing, f"/tasks/{quote(task_id, safe='')}")
