"""The queue's ``held_by`` filter and the holder its held rows show, over tasks held as the
ledger records holds (an operator's move with who made it, a run's close that halted, spent
its attempts or hit a human gate, the admission of an unrunnable task), on SQLite and
PostgreSQL; and the cost and run-time columns and sorts."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from fastapi.testclient import TestClient
from support.dashboard import BASE, credentials, log_in
from support.ledger_driver import Driver
from support.store_fixtures import *  # noqa: F403  (ledger and driver, on both backends)

from assay.adapters.actor import Actor
from assay.adapters.store.sql import Ledger
from assay.adapters.store.usage_log import DispatchKey
from assay.core.settle import Verdict
from assay.core.tasks import Task
from assay.core.usage import UsageFigures
from assay.core.vocab import ActorVia, OperatorMove, RunStatus, UsageRole
from assay.engine.operations.moves import move_task
from assay.web import views
from assay.web.app import create_app
from assay.web.config import WebConfig
from assay.web.queue_query import QueueQuery

STATUSES = ["needs-you", "queued", "running", "held", "failed", "done", "unreadable"]


def _run(driver: Driver, task_id: str, verdict: Verdict, *, max_attempts: int = 3) -> None:
    started = driver.start(task_id, f"r-{task_id}")
    close = driver.close_for(started, f"r-{task_id}", verdict, max_attempts=max_attempts)
    driver.ledger.close_run(close)


def _world(ledger: Ledger, driver: Driver) -> None:
    for task_id in ("alice", "bob", "halt", "budget", "gate", "unrunnable", "free"):
        driver.add(task_id)
    for task_id in ("alice", "bob"):
        actor = Actor(task_id, ActorVia.CLI)
        move_task(ledger, task_id, OperatorMove.HOLD, actor=actor, now=driver.now())
    _run(driver, "halt", Verdict(status=RunStatus.BLOCKED, halted=True))
    _run(driver, "budget", Verdict(status=RunStatus.FAILED), max_attempts=1)
    _run(driver, "gate", Verdict(status=RunStatus.BLOCKED, left_pr=True))
    # Held by its admission, after an earlier run that halted and a release: the newest
    # decision is the save, not that run's close.
    _run(driver, "unrunnable", Verdict(status=RunStatus.BLOCKED, halted=True))
    actor = Actor("carol", ActorVia.WEB)
    move_task(ledger, "unrunnable", OperatorMove.RELEASE, actor=actor, now=driver.now())
    task = ledger.get_task("unrunnable")
    task.cannot_run("claude is not installed here", driver.now())
    ledger.save_task(task)


def _ids(ledger: Ledger, **params: str) -> set[str]:
    page = views.queue_page(ledger, query=QueueQuery.of(params, STATUSES))
    return {row.task_id for row in page.rows}


def test_each_holder_is_told_apart(ledger: Ledger, driver: Driver) -> None:
    _world(ledger, driver)
    assert _ids(ledger, held_by="operator") == {"alice", "bob"}
    assert _ids(ledger, held_by="operator:alice") == {"alice"}
    assert _ids(ledger, held_by="operator:carol") == set()  # carol released, never held
    assert _ids(ledger, held_by="halt") == {"halt"}
    assert _ids(ledger, held_by="budget") == {"budget"}
    assert _ids(ledger, held_by="gate") == {"gate"}
    assert _ids(ledger, held_by="unrunnable") == {"unrunnable"}
    assert _ids(ledger, held_by="machine") == {"halt", "budget", "gate", "unrunnable"}
    assert _ids(ledger, held_by="machine", q="budget") == {"budget"}
    shown = {row.task_id: row.held_by for row in views.queue_page(ledger).rows}
    assert shown == {
        "alice": "operator:alice",
        "bob": "operator:bob",
        "halt": "halt",
        "budget": "budget",
        "gate": "gate",
        "unrunnable": "unrunnable",
        "free": None,
    }


def test_cost_and_run_time_sort_and_show(ledger: Ledger, driver: Driver) -> None:
    for task_id in ("cheap", "dear", "unknown"):
        ledger.add_task(Task.new(id=task_id, title=task_id, instruction="x", now=driver.now()))
    for task_id, cost, minutes in (("cheap", 0.01, 1), ("dear", 2.5, 30), ("unknown", None, 5)):
        started = driver.start(task_id, f"r-{task_id}")
        key = DispatchKey(task_id, f"r-{task_id}", "a1.s1", UsageRole.CODER, "claude", 1, 1)
        figures = UsageFigures(10, 10, cost_usd=cost)
        ledger.record_usage(key, figures, priced=cost is not None, at=driver.now())
        driver.clock += timedelta(minutes=minutes)
        verdict = Verdict(status=RunStatus.MERGED)
        ledger.close_run(driver.close_for(started, f"r-{task_id}", verdict))
    by_cost = views.queue_page(ledger, query=QueueQuery.of({"sort": "cost"}, STATUSES))
    assert [r.task_id for r in by_cost.rows] == ["dear", "cheap", "unknown"]
    unknown = by_cost.rows[-1]
    assert (unknown.cost_usd, unknown.cost_unknown) == (0.0, 1)  # unknown, never $0
    asc = QueueQuery.of({"sort": "duration", "dir": "asc"}, STATUSES)
    by_time = views.queue_page(ledger, query=asc)
    assert [r.task_id for r in by_time.rows] == ["cheap", "unknown", "dear"]
    assert by_time.rows[-1].run_seconds > 30 * 60


def test_the_page_shows_the_holder_and_an_unknown_cost_as_a_lower_bound(
    ledger: Ledger, driver: Driver, tmp_path: Path
) -> None:
    _world(ledger, driver)
    started = driver.start("free", "r-free")
    key = DispatchKey("free", "r-free", "a1.s1", UsageRole.CODER, "claude", 1, 1)
    ledger.record_usage(key, UsageFigures(5, 5, cost_usd=0.5), priced=True, at=driver.now())
    ledger.record_usage(key, UsageFigures(5, 5), priced=False, at=driver.now())
    config = WebConfig(ledger=ledger, credentials=credentials(tmp_path / "config"))
    with TestClient(create_app(config), base_url=BASE) as client:
        log_in(client)
        html = client.get("/?held_by=operator:alice&sort=cost").text
        assert 'href="?held_by=operator%3Aalice&amp;sort=cost&amp;dir=asc"' in html  # kept
        assert ">operator:alice<" in html.replace('<span class="long">', ">")
        assert "title bob" not in html
        html = client.get("/").text
    assert "≥ $0.5000" in html and "1 unknown" in html  # the known part, never a whole
    assert "running" in html  # its run time goes on
    assert started.id == "free"
