"""A run's and a task's pages show what the usage journal sums (tokens, the cost or its known
part, and the dispatches whose cost is unknown), in place of the seats' own figures; a run
from before the journal keeps those. In-process, over a SQLite ledger written through the
Ledger."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from support.usage_journal import fill, report

from assay.adapters.store.sql import Ledger
from assay.core.settle import Verdict
from assay.core.usage import UsageFigures
from assay.core.vocab import RunStatus, UsageRole
from assay.web import views

sys.path.insert(0, str(Path(__file__).parents[2] / "support"))

from ledger_driver import Driver, Wave

NOW = datetime.now(UTC)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    """The journal of ``support.usage_journal``, and ``t-old``: a closed run whose seat's
    dispatch row says 1,000 tokens and no cost and which journaled nothing, then a closed run
    whose seat's row says the same but whose journal says 12,800 tokens and $0.0612, beside a
    judge that reported tokens but no cost."""
    with Ledger.open(f"sqlite:///{tmp_path / 'assay.db'}") as made:
        fill(made, NOW)
        driver = Driver(made, start=NOW - timedelta(hours=5))
        driver.add("t-old")
        driver.cycle("t-old", "r-old", RunStatus.FAILED, (Wave(dispatches=1),), max_attempts=5)
        task = driver.start("t-old", "r-new")
        report(made, driver.now(), "t-old", "r-new", "a1.s0", "command",
               UsageFigures(12_000, 800, 0.0612, "claude-sonnet-4"), seat=0)  # fmt: skip
        report(made, driver.now(), "t-old", "r-new", "a1.judges.j1", "j1",
               UsageFigures(300, 20, None, "mini"), role=UsageRole.JUDGE)  # fmt: skip
        verdict = Verdict(status=RunStatus.FAILED)
        made.close_run(driver.close_for(task, "r-new", verdict, (Wave(dispatches=1),)))
        yield made


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def _stat(text: str, label: str) -> str:
    found = re.search(rf"{label} (\S+(?: \S+)?) (?:Coder time|Cost|Settle)", text)
    assert found, text[:400]
    return found.group(1)


def test_the_run_page_shows_the_journals_sums_over_the_seats_figures(client: TestClient) -> None:
    text = _text(client.get("/runs/r-new").text)
    assert _stat(text, "Tokens") == "13.1k"  # 12,800 of the seat and 320 of the judge
    assert _stat(text, "Cost") == "≥ $0.0612"
    assert "cost unknown for 1 of 2 dispatches: 1 reported tokens but no cost" in text
    # The seat's row says 1,000 tokens and no cost; its journal says what it spent.
    seat = re.search(r"#0 .*? (\S+) (\S+) \d+(?:\.\d)? s", text)
    assert seat and seat.groups() == ("12.8k", "$0.0612"), text


def test_a_run_from_before_the_journal_keeps_its_seats_figures(client: TestClient) -> None:
    text = _text(client.get("/runs/r-old").text)
    assert _stat(text, "Tokens") == "1k" and _stat(text, "Cost") == "—"
    assert "cost unknown" not in text


def test_an_unreported_dispatch_is_unknown_never_zero(ledger: Ledger) -> None:
    run = views.run_view(ledger, "r-2", state_dir=None)
    assert run is not None and run.usage is not None
    assert (run.usage.dispatches, run.usage.unreported, run.usage.cost_usd) == (2, 1, None)
    assert run.totals.tokens == 7_900 and run.totals.cost_usd is None


def test_the_task_page_sums_its_runs(client: TestClient) -> None:
    html = client.get("/tasks/t-fix").text
    text = _text(html)
    assert "Spent 22.4k tokens · ≥ $0.0761" in text
    assert "(cost unknown for 1 of 3 dispatches: 1 reported tokens but no cost)" in text
    row = re.search(
        r'<tr>\s*<td class="nowrap"><a class="mono" href="/runs/r-1">.*?</tr>', html, re.S
    )
    assert row is not None
    assert "22.4k" in row.group(0) and "≥ $0.0761" in row.group(0) and "(1 unknown)" in row.group(0)
    idle = _text(client.get("/tasks/t-idle").text)
    assert "Spent" not in idle
    old = views.task_view(client.app.state.config.ledger, "t-old")  # type: ignore[attr-defined]
    assert old is not None and set(old.run_usage) == {"r-new"}
