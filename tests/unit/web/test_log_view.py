"""The log view and long texts: a run's logs listed and linked on its page, one log shown with
its colours and numbered lines or downloaded as it is kept, a huge reason cut on every page
with a "show all" that opens it whole. In-process, over a SQLite ledger."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from support.dashboard import BASE, credentials

from assay.adapters.store.sql import Ledger
from assay.core.run_logs import KeptLog
from assay.core.vocab import EventKind, LogRole, RunStatus
from assay.web import view_logs
from assay.web.app import create_app
from assay.web.config import WebConfig
from assay.web.view_models import ValidatorView

sys.path.insert(0, str(Path(__file__).parents[2] / "support"))

from ledger_driver import Driver, Wave

NOW = datetime.now(UTC)
ESC = "\x1b"
PYTEST_LOG = f"$ pytest -q\n{ESC}[1m{ESC}[31mE   assert 1 == 2{ESC}[0m\n<b>not bold</b>\n1 failed"
WORD = "x" * 60_000  # a coder's one-word --evidence, 60 KB
VALIDATOR_LOG = "attempt-1/seat-1/validators/validator-tests.log"
CODER_LOG = "attempt-1/seat-1/coder-attempt1.log"


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(f"sqlite:///{tmp_path / 'assay.db'}") as made:
        driver = Driver(made, start=NOW - timedelta(hours=1))
        driver.add("t1")
        task = driver.start("t1", "r1")
        made.append_event(
            EventKind.VALIDATOR_FINISHED,
            {"attempt": 1, "seat": 1, "validator": "tests", "severity": "block",
             "justification": PYTEST_LOG[-30:]},
            at=driver.now(), task_id="t1", run_id="r1",
        )  # fmt: skip
        made.ship_logs(
            "r1",
            [
                KeptLog(VALIDATOR_LOG, LogRole.VALIDATOR, 1, 1, 900_000, PYTEST_LOG, True),
                KeptLog(CODER_LOG, LogRole.CODER, 1, 1, 12, "coder output", False),
            ],
            at=driver.now(),
        )
        from assay.core.settle import Verdict

        made.close_run(driver.close_for(task, "r1", Verdict(status=RunStatus.BLOCKED), (Wave(),)))
        held = made.get_task("t1")
        if held.status.value != "held":
            held.hold(f"evidence: {WORD}", driver.now())
            made.save_task(held)
        yield made


def test_a_log_page_shows_colours_numbered_lines_and_the_cut(client: TestClient) -> None:
    page = client.get(f"/runs/r1/logs/{VALIDATOR_LOG}")
    assert page.status_code == 200
    html = page.text
    assert '<span class="ansi-fg-31 ansi-bold">E   assert 1 == 2</span>' in html
    assert "&lt;b&gt;not bold&lt;/b&gt;" in html and ESC not in html
    assert re.search(
        r'<li id="L4"><a class="ln" href="#L4"[^>]*>4</a><span class="lt">1 failed', html
    )
    assert 'class="cut-notice"' in html  # the ledger keeps its ends only
    assert 'id="log-search"' in html and "/static/log.js" in html
    assert 'href="?download=1"' in html


def test_a_log_downloads_as_plain_text_as_it_is_kept(client: TestClient) -> None:
    got = client.get(f"/runs/r1/logs/{VALIDATOR_LOG}?download=1")
    assert got.status_code == 200
    assert got.headers["content-type"].startswith("text/plain")
    assert got.headers["content-disposition"] == (
        'attachment; filename="r1-attempt-1-seat-1-validators-validator-tests.log"'
    )
    assert got.text == PYTEST_LOG  # the escapes too: a terminal shows them


def test_an_unknown_log_or_run_is_a_404(client: TestClient) -> None:
    assert client.get("/runs/r1/logs/attempt-9/nothing.log").status_code == 404
    assert client.get(f"/runs/nope/logs/{VALIDATOR_LOG}").status_code == 404
    assert client.get("/tasks/t1/text/contract").status_code == 404


def test_the_log_view_needs_a_credential(ledger: Ledger, tmp_path: Path) -> None:
    config = WebConfig(ledger=ledger, credentials=credentials(tmp_path / "config"))
    with TestClient(create_app(config), base_url=BASE) as anonymous:
        assert anonymous.get(f"/runs/r1/logs/{VALIDATOR_LOG}").status_code == 401
        assert anonymous.get(f"/runs/r1/logs/{VALIDATOR_LOG}?download=1").status_code == 401
        assert anonymous.get("/tasks/t1/text/hold_reason").status_code == 401


def test_the_run_page_lists_its_logs_and_links_the_validator_to_its_full_log(
    client: TestClient,
) -> None:
    html = client.get("/runs/r1").text
    assert f'href="/runs/r1/logs/{VALIDATOR_LOG}"' in html
    assert f'href="/runs/r1/logs/{CODER_LOG}"' in html
    assert ">Full log</a>" in html


def test_a_huge_hold_reason_is_cut_everywhere_and_opens_whole(client: TestClient) -> None:
    for path in ("/", "/tasks/t1"):
        html = client.get(path).text
        assert "x" * 1000 not in html  # a readable start, not the 60 KB
        assert 'href="/tasks/t1/text/hold_reason"' in html
        assert "show all (60 KB)" in html
    whole = client.get("/tasks/t1/text/hold_reason")
    assert whole.status_code == 200 and WORD in whole.text
    assert client.get("/tasks/t1/text/hold_reason?download=1").text == f"evidence: {WORD}"


def test_validator_log_names_match_how_each_kind_names_its_file() -> None:
    from assay.adapters.store.run_logs import LogEntry

    def entry(name: str) -> LogEntry:
        return LogEntry(
            name=name, role=LogRole.VALIDATOR, attempt=2, seat=1, size=1, truncated=False,
            updated_at=NOW,
        )  # fmt: skip

    logs = [
        entry("attempt-2/seat-1/validators/validator-unit_tests.log"),
        entry("attempt-2/seat-1/validators/judge-my_judge.jsonl"),
    ]
    assert view_logs.validator_log(logs, 2, 1, "unit tests") == logs[0].name
    assert view_logs.validator_log(logs, 2, 1, "my judge") == logs[1].name
    assert view_logs.validator_log(logs, 1, 1, "unit tests") is None
    view = ValidatorView(2, 1, "unit tests", "block", False, "", [])
    assert view.log is None


def test_download_names_cannot_break_a_header() -> None:
    assert view_logs.download_name('r"1', "a/b\r\nc.log") == "r_1-a-b__c.log"


def test_a_huge_title_is_cut_on_every_page_and_opens_whole(
    ledger: Ledger, client: TestClient
) -> None:
    import sqlalchemy as sa

    from assay.adapters.store.schema import tasks

    title = "\u202e<script>" + "t" * 200_000
    with ledger._engine.begin() as conn:
        conn.execute(sa.update(tasks).where(tasks.c.id == "t1").values(title=title))
    for path in ("/", "/tasks/t1", "/runs/r1", "/tasks/t1/text/hold_reason"):
        html = client.get(path).text
        assert "t" * 1000 not in html, path  # a readable start, never the 200 KB
        assert "<script>" not in html and "\u202e" not in html, path
        head = re.search(r"<title>(.*)</title>", html)
        assert head is not None and len(head.group(1)) < 200, path
    for path in ("/tasks/t1", "/runs/r1"):
        assert 'href="/tasks/t1/text/title"' in client.get(path).text
    whole = client.get("/tasks/t1/text/title")
    assert whole.status_code == 200 and "t" * 200_000 in whole.text
