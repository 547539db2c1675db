"""The dashboard's pages (GET only): the queue, a task, a run, the fired halts, the payload.

Each page is one read model of :mod:`assay.web.views` rendered by one template; its live part
is a partial template also served alone under ``/fragments/...`` so ``live.js`` can swap it in
when the event log moves. Without JavaScript a page is complete; a reload shows the same.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from assay.core.vocab import TaskStatus
from assay.web import views
from assay.web.config import WebConfig
from assay.web.held_by import HeldBy
from assay.web.queue_query import SORTS, BadQuery, QueueQuery
from assay.web.rendering import render
from assay.web.view_queue import NEEDS_YOU_STATUS

router = APIRouter()

PER_PAGE = 50
# The filter tabs, in the order an operator reads a queue: what waits, what runs, what needs a
# human, what ended.
STATUS_ORDER = [
    TaskStatus.QUEUED.value,
    TaskStatus.RUNNING.value,
    TaskStatus.HELD.value,
    TaskStatus.FAILED.value,
    TaskStatus.DONE.value,
    views.UNREADABLE_STATUS,
]
# What the status filter takes: a status, or every task that waits for an operator.
STATUS_FILTERS = [NEEDS_YOU_STATUS, *STATUS_ORDER]
PageNumber = Annotated[int, Query(ge=1, le=1_000_000, description="1-based page")]


def _config(request: Request) -> WebConfig:
    config: WebConfig = request.app.state.config
    return config


def _not_found(request: Request, what: str, ident: str) -> Response:
    return render(
        request,
        "message.html",
        {"title": f"No such {what}", "message": f"There is no {what} {ident!r}.", "back": "/"},
        404,
    )


def _shown(
    request: Request, template: str, context: dict[str, Any] | None, what: str, ident: str
) -> Response:
    """A page (or its fragment) of one task or run, or the not-found page when there is none."""
    if context is None:
        return _not_found(request, what, ident)
    return render(request, template, context)


HELD_BY_CHOICES = [
    (HeldBy.OPERATOR.value, "an operator"),
    (HeldBy.MACHINE.value, "the machine (any)"),
    (HeldBy.HALT.value, "a halt"),
    (HeldBy.BUDGET.value, "a spent budget"),
    (HeldBy.GATE.value, "a human gate (PR, landing, no-op)"),
    (HeldBy.UNRUNNABLE.value, "unrunnable here"),
]


def _queue_query(request: Request) -> QueueQuery | Response:
    """The queue's view from the query string; a value it cannot show is a 400 page."""
    try:
        return QueueQuery.of(dict(request.query_params), STATUS_FILTERS)
    except BadQuery as exc:
        return render(
            request, "message.html", {"title": "Bad request", "message": str(exc), "back": "/"}, 400
        )


def _queue_context(request: Request, view: QueueQuery) -> dict[str, Any]:
    queue = views.queue_page(_config(request).ledger, query=view, per_page=PER_PAGE)
    status = view.status
    tabs = [(None, "all", queue.counts.get("all", 0))] + [
        (s, s, queue.counts[s]) for s in STATUS_ORDER if queue.counts.get(s)
    ]
    if status and status not in queue.counts and status != NEEDS_YOU_STATUS:
        tabs.append((status, status, 0))
    return {
        "queue": queue,
        "view": view,
        "sorts": SORTS,
        "tabs": tabs,
        "needs_you": queue.needs_you,
        "query": lambda **changes: view.link(**{"page": view.page, **changes}),
        "fragment": "/fragments/queue" + view.link(),
        "held_by_choices": HELD_BY_CHOICES,
        "held_by_values": [value for value, _label in HELD_BY_CHOICES],
        "now": datetime.now(UTC),
    }


def _query(**params: Any) -> str:
    """A query string without the defaults (no status, page 1), so links stay short."""
    kept = {k: v for k, v in params.items() if v is not None and v != "" and (k, v) != ("page", 1)}
    return "?" + urlencode(kept) if kept else ""


@router.get("/")
def queue(request: Request) -> Response:
    view = _queue_query(request)
    if isinstance(view, Response):
        return view
    return render(request, "queue.html", _queue_context(request, view))


@router.get("/fragments/queue")
def queue_fragment(request: Request) -> Response:
    view = _queue_query(request)
    if isinstance(view, Response):
        return view
    return render(request, "_queue.html", _queue_context(request, view))


def task_moves(row: views.QueueRow, now: datetime) -> tuple[list[str], str]:
    """The operator's moves the task's status allows now (the lifecycle's own rules: hold and
    cancel a queued or failed task, release a held or a waiting one, retry a failed one, stop
    a running one), else why there are none."""
    status = row.status
    waiting = row.not_before is not None and row.not_before > now
    if status == TaskStatus.HELD:
        return ["release"], ""
    if status == TaskStatus.FAILED:  # retry: runs it now, the wait (if any) cleared
        return ["retry", "hold", "cancel"], ""
    if status == TaskStatus.QUEUED:
        return (["release"] if waiting else []) + ["hold", "cancel"], ""
    if status == TaskStatus.RUNNING:
        return ["stop"], ""
    if status == TaskStatus.DONE:
        return [], "The task is done; nothing to hold or release."
    return [], "This task row cannot be read, so it cannot be moved from here."


def _task_context(request: Request, task_id: str) -> dict[str, Any] | None:
    task = views.task_view(_config(request).ledger, task_id)
    if task is None:
        return None
    moves, no_moves = task_moves(task.row, datetime.now(UTC))
    return {
        "task": task,
        "moves": moves,
        "no_moves": no_moves,
        "fragment": f"/fragments/tasks/{quote(task_id, safe='')}",
        "actions_fragment": f"/fragments/tasks/{quote(task_id, safe='')}/actions",
    }


@router.get("/tasks/{task_id}")
def task(request: Request, task_id: str) -> Response:
    return _shown(request, "task.html", _task_context(request, task_id), "task", task_id)


@router.get("/fragments/tasks/{task_id}")
def task_fragment(request: Request, task_id: str) -> Response:
    return _shown(request, "_task.html", _task_context(request, task_id), "task", task_id)


@router.get("/fragments/tasks/{task_id}/actions")
def task_actions_fragment(request: Request, task_id: str) -> Response:
    """The task's action forms, refreshed live as its status moves (a stop's hold arrives)."""
    context = _task_context(request, task_id)
    return _shown(request, "_task_actions.html", context, "task", task_id)


def _run_context(request: Request, run_id: str) -> dict[str, Any] | None:
    config = _config(request)
    run = views.run_view(config.ledger, run_id, state_dir=config.state_dir)
    if run is None:
        return None
    return {"run": run, "fragment": f"/fragments/runs/{quote(run_id, safe='')}"}


@router.get("/runs/{run_id}")
def run(request: Request, run_id: str) -> Response:
    return _shown(request, "run.html", _run_context(request, run_id), "run", run_id)


@router.get("/fragments/runs/{run_id}")
def run_fragment(request: Request, run_id: str) -> Response:
    return _shown(request, "_run.html", _run_context(request, run_id), "run", run_id)


@router.get("/runs/{run_id}/payload.json")
def payload(request: Request, run_id: str) -> Response:
    document = views.payload_document(_config(request).ledger, run_id)
    if document is None:
        return render(
            request,
            "message.html",
            {
                "title": "No payload",
                "message": f"Run {run_id!r} has no payload here (unknown run, still open, "
                "or closed before the ledger kept payloads and its file is not on this machine).",
                "back": f"/runs/{quote(run_id, safe='')}",
            },
            404,
        )
    # The run id is the store's own, but a header is no place to trust one.
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
    return Response(
        json.dumps(document, indent=2, sort_keys=True) + "\n",
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="payload-{name}.json"'},
    )


def _halts_context(request: Request, page: int) -> dict[str, Any]:
    config = _config(request)
    halts = views.halts_page(
        config.ledger, state_dir=config.state_dir, page=page, per_page=PER_PAGE
    )
    return {
        "halts": halts,
        "query": lambda **changes: _query(**{"page": page, **changes}),
        "fragment": "/fragments/halts" + _query(page=page),
    }


@router.get("/halts")
def halts(request: Request, page: PageNumber = 1) -> Response:
    return render(request, "halts.html", _halts_context(request, page))


@router.get("/fragments/halts")
def halts_fragment(request: Request, page: PageNumber = 1) -> Response:
    return render(request, "_halts.html", _halts_context(request, page))
