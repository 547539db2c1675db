"""Stop and re-run from the dashboard, in a real browser against a real ``assay serve
--web-only``: a running ``assay run`` (its coder asleep) is stopped from its task's page (the
run closes interrupted, the task held with the reason, who asked recorded, the page updating
itself), and a failed task waiting out a backoff is re-run from its page."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from support.browser import READY, Dashboard, environ, log_in, shot
from support.repo import ASSAY, Repo, make_repo

from assay.adapters.store.sql import Ledger
from assay.core.tasks import Task
from assay.core.vocab import EventKind, HoldSource, TaskStatus

if TYPE_CHECKING:
    from playwright.sync_api import Page

HOSTILE_REASON = "stop \u202eevil\u202c <b>now</b>"


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Repo, Dashboard]]:
    repo = make_repo(tmp_path_factory.mktemp("stop"))
    dashboard = Dashboard(repo, repo.root.parent / "config")
    try:
        dashboard.ready()
        yield repo, dashboard
    finally:
        dashboard.stop()


def _ledger(repo: Repo) -> Ledger:
    return Ledger(f"sqlite:///{repo.root / '.assay' / 'assay.db'}")


def _running_task(repo: Repo, before: float) -> tuple[str, str]:
    """The task and run the test just started, once its coder runs."""
    with _ledger(repo) as ledger:
        while time.monotonic() - before < 60:
            runs = ledger.open_runs()
            pgids = repo.root / ".assay" / "runs" / runs[0].id / "pgids" if runs else None
            if pgids is not None and pgids.is_file() and pgids.read_text().strip():
                return runs[0].task_id, runs[0].id
            time.sleep(0.1)
    raise AssertionError("the run never started its coder")


def test_a_running_task_is_stopped_from_its_page(stage: tuple[Repo, Dashboard], page: Page) -> None:
    repo, dashboard = stage
    run = subprocess.Popen(
        [str(ASSAY), "run", "sleep on it", "--coder", "command", "--coder-command", "sleep 120",
         "--sandbox", "none"],
        cwd=repo.root, env=environ(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        task_id, run_id = _running_task(repo, time.monotonic())
        log_in(page, dashboard)
        page.goto(f"{dashboard.url}/runs/{run_id}")
        assert page.locator("#run-stop-form button").count() == 1  # the run page offers it too
        page.goto(f"{dashboard.url}/tasks/{task_id}")
        page.wait_for_selector("#live-status.live-on")
        form = page.locator("#stop-form")
        assert form.locator('input[name="csrf"]').count() == 1
        assert page.locator(f'form[action="/tasks/{task_id}/hold"]').count() == 0
        shot(page, "task-running-stop")
        form.locator('input[name="reason"]').fill(HOSTILE_REASON)
        started = time.monotonic()
        form.locator('button[value="cancel"]').click()
        page.wait_for_url(f"**/tasks/{task_id}?notice=stopping")
        assert "Stop sent" in page.locator(".notice").inner_text()
        # The hold arrives as the run closes: the actions panel offers release, no reload.
        page.evaluate("window.__notReloaded = true")
        release = page.locator(f'#task-actions form[action="/tasks/{task_id}/release"]')
        release.wait_for(timeout=READY * 1000)
        assert page.evaluate("window.__notReloaded === true")
        assert time.monotonic() - started < 30  # its coder's sleep 120 was ended
        # The reason is the operator's text, shown as text: no markup, the bidi override visible.
        held = page.locator("#task dl.kv").inner_text()
        assert "<U+202E>evil<U+202C> <b>now</b>" in held
        assert page.locator("#task dl.kv b").count() == 0
        # Both are on record with who: the request, and the hold the run's close made of it.
        page.reload()
        actions = page.locator("#task table.grid").last.inner_text()
        assert "stop (cancel)" in actions and "\ncancel" in actions.replace("\t", "\n")
        assert actions.count("operator") == 2
        shot(page, "task-stopped")
    finally:
        _, err = run.communicate(timeout=60)
    assert run.returncode == 3, err  # the run's own process says the task is held
    with _ledger(repo) as ledger:
        task = ledger.get_task(task_id)
        (record,) = ledger.runs(task_id)
        events = ledger.events(task_id)
    assert (task.status, task.hold_source, task.hold_reason) == (
        TaskStatus.HELD,
        HoldSource.MANUAL,
        HOSTILE_REASON,
    )
    assert not record.open and record.attempt_spent is False
    asked = [e.data for e in events if e.kind == EventKind.TASK_STOP_REQUESTED]
    assert [(a["action"], a["by"], a["via"]) for a in asked] == [("cancel", "operator", "web")]
    saved = [e.data for e in events if e.kind == EventKind.TASK_SAVED][-1]
    assert (saved["action"], saved["by"], saved["via"]) == ("cancel", "operator", "web")


def test_a_failed_task_is_retried_from_its_page(stage: tuple[Repo, Dashboard], page: Page) -> None:
    repo, dashboard = stage
    done = repo.assay(
        "run", "fail it", "--coder", "command", "--coder-command", "echo b > b.txt",
        "--validator", "false", "--sandbox", "none", "--json",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    with _ledger(repo) as ledger:
        (task,) = [t for t in ledger.list_tasks() if t.title == "fail it"]
        task_id = task.id

        def backoff(t: Task) -> dict[str, str]:
            t.wait_until(datetime.now(UTC) + timedelta(hours=1), t.updated_at)
            return {}

        ledger.change_task(task_id, backoff)
    log_in(page, dashboard)
    page.goto(f"{dashboard.url}/tasks/{task_id}")
    assert "Waits until" in page.locator("#task").inner_text()
    retry = page.locator(f'form[action="/tasks/{task_id}/retry"]')
    shot(page, "task-failed-retry")
    retry.locator('button[type="submit"]').click()
    page.wait_for_url(f"**/tasks/{task_id}?notice=retried")
    assert "Task will run again now" in page.locator(".notice").inner_text()
    assert "Waits until" not in page.locator("#task").inner_text()
    with _ledger(repo) as ledger:
        task = ledger.get_task(task_id)
        saved = [e.data for e in ledger.events(task_id) if e.kind == EventKind.TASK_SAVED][-1]
    assert task.status is TaskStatus.FAILED and task.runnable(datetime.now(UTC))
    assert (saved["action"], saved["by"], saved["via"]) == ("retry", "operator", "web")
