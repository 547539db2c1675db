"""Hostile text in shapes the other tests do not try: hundreds of thousands of short lines in
a log view, combining marks stacked into a character hundreds of pixels tall ("zalgo"), a
coder's name of hundreds of KB on the usage page. Each must leave the page readable and of a
bounded size. In-process, over a SQLite ledger."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from support.dashboard import BASE, credentials, log_in
from support.ledger_driver import Driver
from support.usage_journal import report

from assay.adapters.store.schema import tasks
from assay.adapters.store.sql import Ledger
from assay.core.run_logs import KeptLog
from assay.core.text import MAX_MARKS, shown
from assay.core.usage import UsageFigures
from assay.core.vocab import LogRole
from assay.web.app import create_app
from assay.web.config import WebConfig
from assay.web.view_logs import MAX_SHOWN_LINES

NOW = datetime.now(UTC)
LINES = 300_000
STACK = re.compile(f"[\u0300-\u036f\u0489]{{{MAX_MARKS + 1}}}")
ZALGO = "Z" + "\u0301\u0336\u0489" * 400 + "algo"
NAME = "\u202e<b>coder" + "N" * 300_000
STREAM = "attempt-1/seat-1/claude.log.out"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with Ledger.open(f"sqlite:///{tmp_path / 'assay.db'}") as ledger:
        driver = Driver(ledger, start=NOW - timedelta(hours=1))
        driver.add("t1")
        driver.start("t1", "r1")
        with ledger._engine.begin() as conn:  # texts no command writes, at their worst
            conn.execute(
                sa.update(tasks)
                .where(tasks.c.id == "t1")
                .values(instruction="".join(f"{n}\n" for n in range(LINES)), hold_reason=ZALGO)
            )
        lines = "".join(f"l{n}\n" for n in range(MAX_SHOWN_LINES + 10))
        ledger.ship_logs("r1", [KeptLog(STREAM, LogRole.CODER, 1, 1, 1, lines, False)], at=NOW)
        report(ledger, driver.now(), "t1", "r1", "a1.s1", NAME,
               UsageFigures(10, 10, 0.1, "m"), seat=1)  # fmt: skip
        config = WebConfig(ledger=ledger, credentials=credentials(tmp_path / "config"))
        with TestClient(create_app(config), base_url=BASE, raise_server_exceptions=False) as c:
            log_in(c)
            yield c


def test_a_text_of_hundreds_of_thousands_of_lines_shows_its_ends_and_counts_the_rest(
    client: TestClient,
) -> None:
    page = client.get("/tasks/t1/text/instruction")
    assert page.status_code == 200
    assert len(page.text) < 3_000_000  # 300,000 lines shown were 35 MB
    shown_ids = re.findall(r'<li id="L(\d+)"', page.text)
    assert len(shown_ids) == MAX_SHOWN_LINES
    half = MAX_SHOWN_LINES // 2
    assert shown_ids[half - 1] == str(half) and shown_ids[half] == str(LINES + 2 - half)
    assert f"… {LINES + 1 - MAX_SHOWN_LINES:,} lines not shown here" in page.text
    assert f"{LINES + 1} lines, {MAX_SHOWN_LINES} shown" in page.text
    download = client.get("/tasks/t1/text/instruction?download=1").text
    assert download.count("\n") == LINES  # the whole text, every line


def test_a_live_log_past_the_lines_shown_is_not_followed(client: TestClient) -> None:
    page = client.get(f"/runs/r1/logs/{STREAM}")
    assert "data-follow" not in page.text and "lines not shown here" in page.text
    update = client.get(f"/fragments/runs/r1/logs/{STREAM}?length=3&sig=x").json()
    assert update["lines"] == [] and update["live"] is False
    assert "more lines than the view shows" in update["note"]


def test_stacked_combining_marks_are_shown_by_code_point_past_a_few() -> None:
    for text in (shown(ZALGO), shown(ZALGO, lines=True)):
        assert "<U+0301>" in text and "algo" in text
        assert not STACK.search(text)
    assert shown("caf\u00e9 e\u0301\u0302 \u05e9\u05c1\u05bc\u05b8") == (
        "caf\u00e9 e\u0301\u0302 \u05e9\u05c1\u05bc\u05b8"
    )  # accents and a Hebrew letter's points are no stack


def test_a_zalgo_reason_is_no_taller_on_a_page(client: TestClient) -> None:
    for path in ("/tasks/t1", "/tasks/t1/text/hold_reason", "/"):
        html = client.get(path).text
        assert "Z\u0301\u0336\u0489" in html, path  # a few marks stay: accents are text
        assert not STACK.search(html), path


def test_a_huge_coder_name_is_cut_on_the_usage_page(client: TestClient) -> None:
    page = client.get("/usage")
    assert page.status_code == 200
    assert len(page.text) < 200_000  # the name whole, in every bar and row, was 2.7 MB
    assert "N" * 1000 not in page.text and "<b>coder" not in page.text
    assert "&lt;U+202E&gt;&lt;b&gt;coder" in page.text
    assert len(client.get("/usage.json").json()["coders"][0]["coder"]) == len(NAME)
