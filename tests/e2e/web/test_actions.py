"""The dashboard's actions, through the whole app, on a private copy of a ledger real runs filled.

Each move is posted the way a browser posts the page's form (logged in, same origin, the
page's CSRF token), and checked in the ledger: the task's new status and the ``task.saved`` /
``halt.rearmed`` event naming who did it (the token's name, whatever a form says), via web.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from fastapi.testclient import TestClient
from support.dashboard import BASE, OPERATOR, credentials, log_in
from support.ledger_driver import Driver

from assay.adapters.store.sql import Ledger
from assay.core.settle import Verdict
from assay.core.vocab import EventKind, RunStatus
from assay.web.app import create_app
from assay.web.config import WebConfig
from assay.web.tokens import TokenStore

if TYPE_CHECKING:
    from conftest import World


def client(world: World, ledger: Ledger, *, logged_in: bool = True, **config: Any) -> TestClient:
    settings = {
        "state_dir": world.state_dir,
        "credentials": credentials(world.repo.root.parent / "config"),
        **config,
    }
    app = create_app(WebConfig(ledger=ledger, **settings))
    c = TestClient(app, base_url=BASE, follow_redirects=False)
    if logged_in:
        log_in(c)
    return c


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


def test_release_from_the_page_records_the_token_name_via_web(world_copy: World) -> None:
    with Ledger(world_copy.url) as ledger:
        c = client(world_copy, ledger)
        page = f"/tasks/{world_copy.held_task}"
        done = post(c, f"{page}/release", page, by="alice")  # a posted name counts for nothing
        assert done.status_code == 303, done.text
        assert done.headers["location"] == f"{page}?notice=released"
        assert ledger.get_task(world_copy.held_task).status == "queued"
        assert saved(ledger, world_copy.held_task) == {
            "status": "queued",
            "action": "release",
            "by": OPERATOR,
            "via": "web",
            "reason": None,
        }
        assert "assay_by" not in c.cookies
        shown = c.get(done.headers["location"])
        assert shown.status_code == 200 and "Task released" in shown.text


def test_hold_then_cancel_are_recorded_under_each_token_s_name(world_copy: World) -> None:
    with Ledger(world_copy.url) as ledger:
        c = client(world_copy, ledger)
        page = f"/tasks/{world_copy.queued_task}"
        held = post(c, f"{page}/hold", page, reason="waiting for review", by="mallory")
        assert held.status_code == 303, held.text
        assert held.headers["location"] == f"{page}?notice=held"
        task = ledger.get_task(world_copy.queued_task)
        assert task.status == "held" and task.hold_reason == "waiting for review"
        assert saved(ledger, world_copy.queued_task)["by"] == OPERATOR

        post(c, f"{page}/release", page)
        _, grace = TokenStore(world_copy.repo.root.parent / "config").add("grace")
        other = client(world_copy, ledger, logged_in=False)
        log_in(other, grace)
        cancelled = post(other, f"{page}/cancel", page, reason="not needed")
        assert cancelled.status_code == 303, cancelled.text
        move = saved(ledger, world_copy.queued_task)
        assert move["action"] == "cancel" and move["by"] == "grace" and move["via"] == "web"
        assert move["reason"] == "not needed"


def test_a_script_acts_with_a_bearer_token_under_its_name(world_copy: World) -> None:
    with Ledger(world_copy.url) as ledger:
        c = client(world_copy, ledger, logged_in=False)
        _, secret = TokenStore(world_copy.repo.root.parent / "config").add("ci-bot")
        done = c.post(
            f"/tasks/{world_copy.held_task}/release",
            data={"by": "alice"},
            headers={"Authorization": f"Bearer {secret}"},
        )
        assert done.status_code == 303, done.text
        assert saved(ledger, world_copy.held_task)["by"] == "ci-bot"


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
        assert done.headers["location"] == f"{page}?notice=rearmed"
        rearmed = [e for e in ledger.events(run_id=world_copy.halt_run) if e.kind == "halt.rearmed"]
        assert len(rearmed) == 1
        assert rearmed[0].data["by"] == OPERATOR and rearmed[0].data["via"] == "web"
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
    ("case", "headers", "logged_in", "status"),
    [
        ("foreign origin", {"Origin": "http://evil.example"}, True, 403),
        # The observed attack: no login, the form's CSRF cookie, a matching Origin, by=alice.
        ("no credential", {"Origin": BASE}, False, 401),
    ],
)
def test_a_forged_action_is_refused_and_the_ledger_unchanged(
    world_copy: World, case: str, headers: dict[str, str], logged_in: bool, status: int
) -> None:
    with Ledger(world_copy.url) as ledger:
        c = client(world_copy, ledger, logged_in=logged_in)
        c.get("/")  # the CSRF cookie (401 without a login: the login form sets it too)
        before = len(ledger.events())
        for move in ("release", "cancel", "stop", "retry"):
            refused = c.post(
                f"/tasks/{world_copy.held_task}/{move}",
                data={"csrf": c.cookies.get("assay_csrf", ""), "by": "alice"},
                headers=headers,
            )
            assert refused.status_code == status, case
        rearm = c.post(
            f"/runs/{world_copy.halt_run}/halts/halt-scope-breach/rearm",
            data={"csrf": c.cookies.get("assay_csrf", ""), "evidence": "trust me"},
            headers=headers,
        )
        assert rearm.status_code == status, case
        assert ledger.get_task(world_copy.held_task).status == "held"
        assert len(ledger.events()) == before


def test_stop_and_retry_are_refused_where_the_status_does_not_allow_them(
    world_copy: World,
) -> None:
    with Ledger(world_copy.url) as ledger:
        c = client(world_copy, ledger)
        before = len(ledger.events())
        page = f"/tasks/{world_copy.queued_task}"
        stop = post(c, f"{page}/stop", page, reason="no run", mode="hold")
        assert stop.status_code == 409 and "Not stopped" in stop.text
        assert "is queued, not running: there is no run to stop" in stop.text
        retry = post(c, f"{page}/retry", page)
        assert retry.status_code == 409 and "Not retried" in retry.text
        assert "is queued, not failed" in retry.text
        odd = post(c, f"{page}/stop", page, mode="delete")
        assert odd.status_code == 400
        assert post(c, "/tasks/no-such-task/retry", "/").status_code == 404
        assert ledger.get_task(world_copy.queued_task).status == "queued"
        assert len(ledger.events()) == before
        shown = c.get(page).text  # a queued task offers neither
        assert f"/tasks/{world_copy.queued_task}/stop" not in shown
        assert f"/tasks/{world_copy.queued_task}/retry" not in shown


def test_retry_of_a_failed_waiting_task_runs_it_now_recorded_via_web(world_copy: World) -> None:
    with Ledger(world_copy.url) as ledger:
        driver = Driver(ledger)
        driver.add("t-failed")
        task = driver.start("t-failed", "r-failed")
        close = driver.close_for(
            task, "r-failed", Verdict(status=RunStatus.STALLED, quota_hit=True)
        )
        close.task.wait_until(datetime.now(UTC) + timedelta(hours=1), close.finished_at)
        ledger.close_run(close)
        c = client(world_copy, ledger)
        page = "/tasks/t-failed"
        shown = c.get(page).text
        assert 'action="/tasks/t-failed/retry"' in shown and "Retry now" in shown
        done = post(c, f"{page}/retry", page)
        assert done.status_code == 303, done.text
        assert done.headers["location"] == f"{page}?notice=retried"
        task = ledger.get_task("t-failed")
        assert task.status == "failed" and task.not_before is None
        assert task.runnable(datetime.now(UTC))
        move = saved(ledger, "t-failed")
        assert (move["action"], move["by"], move["via"]) == ("retry", OPERATOR, "web")
        assert "Task will run again now" in c.get(done.headers["location"]).text
