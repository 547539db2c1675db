"""The dashboard's actions, through the whole app, on a private copy of a ledger real runs filled.

Each move is posted the way a browser posts the page's form (same origin, the page's CSRF
token), and checked in the ledger: the task's new status and the ``task.saved`` /
``halt.rearmed`` event naming who did it, via web.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest
from fastapi.testclient import TestClient

from assay.adapters.store.sql import Ledger
from assay.core.vocab import EventKind
from assay.web.app import create_app
from assay.web.config import WebConfig

if TYPE_CHECKING:
    from conftest import World

BASE = "http://127.0.0.1:8765"
TOKEN = "s3cret-token-for-tests"


def client(world: World, ledger: Ledger, **config: Any) -> TestClient:
    settings = {"state_dir": world.state_dir, **config}
    app = create_app(WebConfig(ledger=ledger, **settings))
    return TestClient(app, base_url=BASE, follow_redirects=False)


def csrf(c: TestClient, page: str) -> str:
    """The page's form token (the cookie's value: a page without a form, e.g. a done task
    shows no moves, still sets it, and a hand-made POST would use it)."""
    shown = c.get(page)
    assert shown.status_code == 200, shown.text
    found = re.search(r'name="csrf" value="([^"]+)"', shown.text)
    token = c.cookies["assay_csrf"]
    assert found is None or found.group(1) == token
    return token


def post(c: TestClient, url: str, page: str, **fields: str) -> Any:
    return c.post(url, data={"csrf": csrf(c, page), **fields}, headers={"Origin": BASE})


def saved(ledger: Ledger, task_id: str) -> dict[str, Any]:
    moves = [e for e in ledger.events(task_id) if e.kind == EventKind.TASK_SAVED]
    return moves[-1].data


def test_release_from_the_page_records_who_and_via_web(world_copy: World) -> None:
    with Ledger(world_copy.url) as ledger:
        c = client(world_copy, ledger)
        page = f"/tasks/{world_copy.held_task}"
        done = post(c, f"{page}/release", page, by="  Ada   Lovelace ")
        assert done.status_code == 303, done.text
        location = done.headers["location"]
        assert location.startswith(f"{page}?notice=") and "released" in location
        assert ledger.get_task(world_copy.held_task).status == "queued"
        assert saved(ledger, world_copy.held_task) == {
            "status": "queued",
            "action": "release",
            "by": "Ada Lovelace",
            "via": "web",
            "reason": None,
        }
        assert c.cookies["assay_by"].strip('"') == "Ada Lovelace"
        shown = c.get(location)
        assert shown.status_code == 200 and "released" in shown.text


def test_hold_then_cancel_with_reasons_and_a_remembered_name(world_copy: World) -> None:
    with Ledger(world_copy.url) as ledger:
        c = client(world_copy, ledger)
        page = f"/tasks/{world_copy.queued_task}"
        held = post(c, f"{page}/hold", page, reason="waiting for review", by="grace")
        assert held.status_code == 303, held.text
        task = ledger.get_task(world_copy.queued_task)
        assert task.status == "held" and task.hold_reason == "waiting for review"
        assert saved(ledger, world_copy.queued_task)["by"] == "grace"

        c.post(f"{page}/release", data={"csrf": csrf(c, page)}, headers={"Origin": BASE})
        cancelled = post(c, f"{page}/cancel", page, reason="not needed")  # no name: remembered
        assert cancelled.status_code == 303, cancelled.text
        move = saved(ledger, world_copy.queued_task)
        assert move["action"] == "cancel" and move["by"] == "grace" and move["via"] == "web"
        assert move["reason"] == "not needed"


def test_an_unnamed_move_records_where_it_came_from(world_copy: World) -> None:
    with Ledger(world_copy.url) as ledger:
        c = client(world_copy, ledger)
        page = f"/tasks/{world_copy.held_task}"
        assert post(c, f"{page}/release", page).status_code == 303
        assert saved(ledger, world_copy.held_task)["by"] == "anonymous at testclient"
        assert "assay_by" not in c.cookies


def test_a_move_the_lifecycle_refuses_is_a_409_page_and_changes_nothing(
    world_copy: World,
) -> None:
    with Ledger(world_copy.url) as ledger:
        c = client(world_copy, ledger)
        before = len(ledger.events())
        page = f"/tasks/{world_copy.done_task}"
        refused = post(c, f"{page}/hold", page, reason="too late")
        assert refused.status_code == 409
        assert "Not held" in refused.text and "Traceback" not in refused.text
        assert ledger.get_task(world_copy.done_task).status == "done"
        assert len(ledger.events()) == before


def test_unknown_task_is_404_and_a_long_reason_is_400(world_copy: World) -> None:
    with Ledger(world_copy.url) as ledger:
        c = client(world_copy, ledger)
        before = len(ledger.events())
        missing = post(c, "/tasks/no-such-task/hold", "/")
        assert missing.status_code == 404 and "no-such-task" in missing.text
        page = f"/tasks/{world_copy.queued_task}"
        long = post(c, f"{page}/hold", page, reason="x" * 2001)
        assert (
            long.status_code == 400 and ledger.get_task(world_copy.queued_task).status == "queued"
        )
        assert len(ledger.events()) == before


def test_rearm_a_fired_halt_from_the_run_page(world_copy: World) -> None:
    with Ledger(world_copy.url) as ledger:
        c = client(world_copy, ledger)
        page = f"/runs/{world_copy.halt_run}"
        url = f"{page}/halts/halt-scope-breach/rearm"
        blank = post(c, url, page, evidence="   ")
        assert blank.status_code == 400
        done = post(c, url, page, evidence="setup.cfg is now in scope", by="ops")
        assert done.status_code == 303, done.text
        assert done.headers["location"].startswith(f"{page}?notice=")
        rearmed = [e for e in ledger.events(run_id=world_copy.halt_run) if e.kind == "halt.rearmed"]
        assert len(rearmed) == 1
        assert rearmed[0].data["by"] == "ops" and rearmed[0].data["via"] == "web"
        assert rearmed[0].data["condition"] == "halt-scope-breach"
        again = post(c, url, page, evidence="twice")
        assert again.status_code == 409  # armed now, not fired: halt_ops says why


def test_rearm_without_a_state_dir_here_is_refused(world_copy: World) -> None:
    with Ledger(world_copy.url) as ledger:
        c = client(world_copy, ledger, state_dir=None)
        page = f"/runs/{world_copy.halt_run}"
        refused = c.post(
            f"{page}/halts/halt-scope-breach/rearm",
            data={"csrf": csrf(c, "/"), "evidence": "fixed"},
            headers={"Origin": BASE},
        )
        assert refused.status_code == 409 and "state folder" in refused.text
        assert not [e for e in ledger.events() if e.kind == "halt.rearmed"]


@pytest.mark.parametrize(
    ("case", "headers", "token", "status"),
    [
        ("foreign origin", {"Origin": "http://evil.example"}, None, 403),
        ("no token", {"Origin": BASE}, TOKEN, 401),
    ],
)
def test_a_forged_action_is_refused_and_the_ledger_unchanged(
    world_copy: World, case: str, headers: dict[str, str], token: str | None, status: int
) -> None:
    with Ledger(world_copy.url) as ledger:
        c = client(world_copy, ledger, token=token)
        c.get("/")  # the CSRF cookie (401 with a token: the login form sets it too)
        before = len(ledger.events())
        refused = c.post(
            f"/tasks/{world_copy.held_task}/release",
            data={"csrf": c.cookies.get("assay_csrf", "")},
            headers=headers,
        )
        assert refused.status_code == status, case
        assert ledger.get_task(world_copy.held_task).status == "held"
        assert len(ledger.events()) == before
