"""The operator's moves from the dashboard: hold, release and cancel a task, stop a running one,
retry a failed one, re-arm a fired halt.

Each goes through :mod:`assay.engine.operations.moves` (a stop and a retry through
:mod:`assay.engine.operations.stopping`), the same path as the CLI, recorded as done
``via`` web ``by`` the name of the credential the request carries (a ``by`` field, if posted,
is ignored: who acts is never what a form says). The security middleware has checked the
credential, the CSRF field and the origin before any of this runs.

Success: 303 to the task (or run) page with ``?notice=<code>`` (:mod:`assay.web.notices`).
Refusal by the lifecycle: 409 with its message; unknown task or run: 404; bad input: 400 —
each the message page, never a traceback.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from assay.adapters.store.errors import RunNotFound, TaskNotFound, UnreadableTask
from assay.core.vocab import ActorVia, OperatorMove
from assay.engine.operations.moves import (
    RELEASED_NOTE,
    Actor,
    MoveRefused,
    RearmRefused,
    move_task,
    rearm_halt,
)
from assay.engine.operations.stopping import RetryRefused, StopRefused, retry_task, stop_task
from assay.web.config import WebConfig
from assay.web.notices import Notice
from assay.web.rendering import render

# The routes are plain functions: FastAPI runs them in its thread pool, so a ledger write that
# waits for a lock never stalls the event loop (and with it every live stream).
router = APIRouter()

MAX_REASON = 2000
MAX_EVIDENCE = 4000


@router.post("/tasks/{task_id}/hold")
def hold(
    request: Request,
    task_id: str,
    reason: Annotated[str, Form()] = "",
) -> Response:
    return _move(request, task_id, OperatorMove.HOLD, reason=reason)


@router.post("/tasks/{task_id}/release")
def release(request: Request, task_id: str) -> Response:
    return _move(request, task_id, OperatorMove.RELEASE, reason="")


@router.post("/tasks/{task_id}/cancel")
def cancel(
    request: Request,
    task_id: str,
    reason: Annotated[str, Form()] = "",
) -> Response:
    return _move(request, task_id, OperatorMove.CANCEL, reason=reason)


@router.post("/tasks/{task_id}/stop")
def stop(
    request: Request,
    task_id: str,
    reason: Annotated[str, Form()] = "",
    mode: Annotated[str, Form()] = "hold",
    back: Annotated[str, Form()] = "",
) -> Response:
    """Ask the running task's run to stop (``mode`` ``cancel``: recorded as cancelled); its
    close holds the task. Back to the task page, or to the run page it was sent from."""
    config = _config(request)
    page = f"/tasks/{quote(task_id, safe='')}"
    if back.startswith("/runs/") and "//" not in back and "?" not in back:
        page = "/runs/" + quote(back.removeprefix("/runs/"), safe="")
    reason = reason.strip()
    if len(reason) > MAX_REASON:
        return _message(request, 400, "Reason too long", f"At most {MAX_REASON} characters.", page)
    if mode not in ("hold", "cancel"):
        return _message(request, 400, "Not stopped", "Stop to hold it, or to cancel it.", page)
    actor = _actor(request)
    if actor is None:
        return _message(request, 401, "Token required", _NO_ACTOR, page)
    try:
        stop_task(
            config.ledger, config.home, task_id, cancel=mode == "cancel", actor=actor,
            now=datetime.now(UTC), reason=reason or None, temporal=config.temporal_stop,
        )  # fmt: skip
    except TaskNotFound:
        return _message(request, 404, "No such task", f"There is no task {task_id!r}.", "/")
    except (UnreadableTask, StopRefused) as exc:
        return _message(request, 409, "Not stopped", str(exc), page)
    return _done(page, Notice.STOPPING)


@router.post("/tasks/{task_id}/retry")
def retry(request: Request, task_id: str) -> Response:
    """Let a failed task run now (its wait cleared, attempts kept)."""
    config = _config(request)
    back = f"/tasks/{quote(task_id, safe='')}"
    actor = _actor(request)
    if actor is None:
        return _message(request, 401, "Token required", _NO_ACTOR, back)
    try:
        retry_task(config.ledger, task_id, actor=actor, now=datetime.now(UTC))
    except TaskNotFound:
        return _message(request, 404, "No such task", f"There is no task {task_id!r}.", "/")
    except (UnreadableTask, RetryRefused) as exc:
        return _message(request, 409, "Not retried", str(exc), back)
    return _done(back, Notice.RETRIED)


@router.post("/runs/{run_id}/halts/{condition}/rearm")
def rearm(
    request: Request,
    run_id: str,
    condition: str,
    evidence: Annotated[str, Form()] = "",
) -> Response:
    config = _config(request)
    back = f"/runs/{quote(run_id, safe='')}"
    evidence = evidence.strip()
    if not evidence:
        return _message(request, 400, "Evidence needed", _NO_EVIDENCE, back)
    if len(evidence) > MAX_EVIDENCE:
        return _message(
            request, 400, "Evidence too long", f"At most {MAX_EVIDENCE} characters.", back
        )
    if config.state_dir is None:
        return _message(request, 409, "Not re-armed", _NO_STATE_DIR, back)
    actor = _actor(request)
    if actor is None:
        return _message(request, 401, "Token required", _NO_ACTOR, back)
    try:
        rearm_halt(
            config.ledger,
            state_dir=config.state_dir,
            run_id=run_id,
            condition=condition,
            evidence=evidence,
            actor=actor,
            now=datetime.now(UTC),
        )
    except RunNotFound:
        return _message(request, 404, "No such run", f"There is no run {run_id!r}.", "/")
    except RearmRefused as exc:
        return _message(request, 409, "Not re-armed", str(exc), back)
    return _done(back, Notice.REARMED)


def _move(request: Request, task_id: str, move: OperatorMove, *, reason: str) -> Response:
    config = _config(request)
    back = f"/tasks/{quote(task_id, safe='')}"
    reason = reason.strip()
    if len(reason) > MAX_REASON:
        return _message(request, 400, "Reason too long", f"At most {MAX_REASON} characters.", back)
    actor = _actor(request)
    if actor is None:
        return _message(request, 401, "Token required", _NO_ACTOR, back)
    try:
        moved = move_task(
            config.ledger,
            task_id,
            move,
            actor=actor,
            now=datetime.now(UTC),
            reason=reason or None,
        )
    except TaskNotFound:
        return _message(request, 404, "No such task", f"There is no task {task_id!r}.", "/")
    except (UnreadableTask, MoveRefused) as exc:
        return _message(request, 409, f"Not {_PAST[move]}", str(exc), back)
    if move is OperatorMove.RELEASE and moved.note != RELEASED_NOTE:
        return _done(back, Notice.WAIT_CLEARED)
    return _done(back, _NOTICE[move])


_PAST = {
    OperatorMove.HOLD: "held",
    OperatorMove.RELEASE: "released",
    OperatorMove.CANCEL: "cancelled",
}
_NOTICE = {
    OperatorMove.HOLD: Notice.HELD,
    OperatorMove.RELEASE: Notice.RELEASED,
    OperatorMove.CANCEL: Notice.CANCELLED,
}
_NO_ACTOR = "Acting needs a token: log in at /login."
_NO_EVIDENCE = "Say what was checked before re-arming: the evidence is kept with the halt."
_NO_STATE_DIR = (
    "This dashboard has no halt state folder, so it cannot re-arm here; "
    "run the command shown on the run page on the machine that ran it."
)


def _actor(request: Request) -> Actor | None:
    """Who acts: the name of the request's credential (the guard found it), never a form's."""
    name = getattr(request.state, "actor", None)
    return Actor(by=name, via=ActorVia.WEB) if isinstance(name, str) and name else None


def _done(back: str, notice: Notice) -> Response:
    return RedirectResponse(f"{back}?notice={notice.value}", status_code=303)


def _message(request: Request, status: int, title: str, message: str, back: str) -> Response:
    return render(
        request, "message.html", {"title": title, "message": message, "back": back}, status
    )


def _config(request: Request) -> WebConfig:
    config: WebConfig = request.app.state.config
    return config
