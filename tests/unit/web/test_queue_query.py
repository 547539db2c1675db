"""The queue to work from: a text search, filters (status, coder, created days), sortable
columns, a last-error column and the "needs you" count, all in the URL. Over a SQLite ledger
written through the Ledger; the SQL is the same on PostgreSQL (the browser tier runs both)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from assay.adapters.store.sql import Ledger
from assay.core.settle import Verdict
from assay.core.tasks import Task
from assay.core.vocab import RunStatus
from assay.web import views
from assay.web.queue_query import BadQuery, QueueQuery

sys.path.insert(0, str(Path(__file__).parents[2] / "support"))

from ledger_driver import Driver

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
STATUSES = ["needs-you", "queued", "running", "held", "failed", "done", "unreadable"]


def _add(ledger: Ledger, n: int, title: str, coder: object, **change: str) -> Task:
    task = Task.new(id=f"t{n}", title=title, instruction="do it", now=T0 + timedelta(days=n))
    ledger.add_task(task, contract={"task": title, "coder": coder})
    at = T0 + timedelta(days=n, hours=1)
    if "hold" in change:
        task.hold(change["hold"], at)
        ledger.save_task(task)
    if "fail" in change:  # a real run that failed it, its reason the last error
        driver = Driver(ledger, start=at)
        started = driver.start(task.id, change["fail"])
        verdict = Verdict(status=RunStatus.FAILED)
        ledger.close_run(driver.close_for(started, change["fail"], verdict, max_attempts=1))
    return task


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(f"sqlite:///{tmp_path / 'assay.db'}") as made:
        _add(made, 1, "Fix the flaky date test", {"kind": "claude", "model": "claude-sonnet-4-5"})
        _add(made, 2, "Speed up the parser", [{"kind": "llm", "model": "gpt-5"}, {"kind": "aider"}])
        _add(made, 3, "Rename the package", {"kind": "claude"}, hold="waiting for the API freeze")
        _add(made, 4, "Drop Python 3.9", {"kind": "command"}, fail="r100%_done")
        yield made


def _titles(ledger: Ledger, **params: str) -> list[str]:
    page = views.queue_page(ledger, query=QueueQuery.of(params, STATUSES))
    return [row.title for row in page.rows]


def test_search_reads_titles_hold_reasons_and_last_errors(ledger: Ledger) -> None:
    assert _titles(ledger, q="FLAKY") == ["Fix the flaky date test"]
    assert _titles(ledger, q="api freeze") == ["Rename the package"]
    assert _titles(ledger, q="run r100") == ["Drop Python 3.9"]  # its last error
    assert _titles(ledger, q="100%_") == ["Drop Python 3.9"]  # wildcards are text
    assert _titles(ledger, q="%") == ["Drop Python 3.9"]
    assert _titles(ledger, q="nothing like it") == []


def test_coder_filter_reads_the_contract_one_coder_or_a_list(ledger: Ledger) -> None:
    assert _titles(ledger, coder="claude") == ["Rename the package", "Fix the flaky date test"]
    assert _titles(ledger, coder="aider") == ["Speed up the parser"]
    assert _titles(ledger, coder="gpt") == ["Speed up the parser"]  # a model's start
    assert _titles(ledger, coder="GPT-5") == ["Speed up the parser"]  # any case
    assert _titles(ledger, coder="aid") == []  # a kind is whole
    assert _titles(ledger, coder="claude", status="held") == ["Rename the package"]


def test_created_days_are_whole_and_both_included(ledger: Ledger) -> None:
    # Task n was created on March n+1, at noon.
    assert _titles(ledger, since="2026-03-04") == ["Drop Python 3.9", "Rename the package"]
    assert _titles(ledger, until="2026-03-03") == ["Speed up the parser", "Fix the flaky date test"]
    assert _titles(ledger, since="2026-03-03", until="2026-03-03") == ["Speed up the parser"]


def test_sorts_and_their_direction(ledger: Ledger) -> None:
    assert _titles(ledger)[0] == "Drop Python 3.9"  # newest first
    assert _titles(ledger, sort="created", dir="asc")[0] == "Fix the flaky date test"
    assert _titles(ledger, sort="updated", dir="desc")[0] == "Drop Python 3.9"
    Driver(ledger, start=T0 + timedelta(days=9)).cycle("t1", "r1", RunStatus.BLOCKED)
    most = views.queue_page(ledger, query=QueueQuery.of({"sort": "attempts"}, STATUSES))
    assert [r.attempts_spent for r in most.rows] == sorted(
        (r.attempts_spent for r in most.rows), reverse=True
    )
    # The oldest task ran once: it comes before the newer ones that never did.
    assert _titles(ledger, sort="attempts")[:2] == ["Drop Python 3.9", "Fix the flaky date test"]
    searched = _titles(ledger, q="e", sort="attempts", dir="asc")  # the searched page too
    assert searched[-2:] == ["Fix the flaky date test", "Drop Python 3.9"]


def test_needs_you_is_held_and_failed(ledger: Ledger) -> None:
    page = views.queue_page(ledger, query=QueueQuery.of({"status": "needs-you"}, STATUSES))
    assert page.needs_you == 2 and page.total == 2
    assert {r.title for r in page.rows} == {"Rename the package", "Drop Python 3.9"}
    assert views.needs_you(ledger) == 2


def test_the_last_error_is_on_its_row(ledger: Ledger) -> None:
    page = views.queue_page(ledger, query=QueueQuery.of({"q": "python"}, STATUSES))
    assert page.total == 1 and "run r100%_done" in (page.rows[0].last_error or "")


@pytest.mark.parametrize(
    "params",
    [
        {"status": "lost"},
        {"sort": "price"},
        {"dir": "up"},
        {"since": "yesterday"},
        {"page": "0"},
        {"held_by": "nobody"},
        {"held_by": "operator:"},
    ],
)
def test_a_value_the_queue_cannot_show_is_refused(params: dict[str, str]) -> None:
    with pytest.raises(BadQuery):
        QueueQuery.of(params, STATUSES)


def test_links_keep_the_view_and_drop_the_defaults() -> None:
    view = QueueQuery(q="flaky test", status="failed", since=date(2026, 3, 1), page=3)
    assert view.link() == "?q=flaky+test&status=failed&since=2026-03-01&page=3"
    assert view.link(status=None) == "?q=flaky+test&since=2026-03-01"  # a new filter: page 1
    assert view.sort_link("updated") == "?q=flaky+test&status=failed&since=2026-03-01&sort=updated"
    flipped = QueueQuery(sort="updated").sort_link("updated")
    assert flipped == "?sort=updated&dir=asc"
    assert QueueQuery().link() == ""


def test_the_page_says_it_all_in_its_url(client: TestClient) -> None:
    html = client.get("/?q=freeze&coder=claude&sort=updated&dir=asc").text
    assert "Rename the package" in html and "Fix the flaky" not in html
    assert 'value="freeze"' in html and 'value="claude"' in html
    assert 'aria-sort="ascending"' in html
    assert "1 task match." in html
    # The live fragment is the same view.
    assert 'data-live-fragment="/fragments/queue?q=freeze&amp;coder=claude&amp;sort=updated' in html
    assert '<span class="count" id="needs-you-count">2</span>' in html  # the navigation


def test_every_page_counts_what_needs_you(client: TestClient) -> None:
    for path in ("/halts", "/tasks/t1"):
        assert '<span class="count" id="needs-you-count">2</span>' in client.get(path).text


def test_the_needs_you_count_is_served_alone(client: TestClient, ledger: Ledger) -> None:
    """What live.js re-reads for the navigation's badge on a page whose fragments lack it."""
    got = client.get("/fragments/needs-you")
    assert got.status_code == 200 and got.text == "2"
    assert got.headers["content-type"].startswith("text/plain")
    assert got.headers["cache-control"] == "no-store"
    _add(ledger, 5, "Bump the lock file", {"kind": "claude"}, hold="wait for the release")
    assert client.get("/fragments/needs-you").text == "3"
    client.cookies.clear()  # the count is the ledger's: only for a logged-in operator
    assert client.get("/fragments/needs-you").status_code in (302, 303, 401)


def test_a_bad_query_is_a_400_page(client: TestClient) -> None:
    got = client.get("/?sort=price")
    assert got.status_code == 400 and "sorts by created, updated, attempts, cost" in got.text
    got = client.get("/?held_by=the+cat")
    assert got.status_code == 400 and "held_by is one of operator, halt" in got.text


def test_a_fragment_never_counts_what_needs_you(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted: list[int] = []
    real = views.needs_you
    monkeypatch.setattr(views, "needs_you", lambda ledger: counted.append(1) or real(ledger))
    assert client.get("/fragments/tasks/t1").status_code == 200
    assert counted == []  # refreshed on every live event: no count it does not show
    assert '<span class="count" id="needs-you-count">2</span>' in client.get("/tasks/t1").text
    assert counted == [1]
