"""The usage page (``/usage``, ``/usage.json``) over a ledger written through the Ledger: the
same sums as ``assay usage``, every day of the range (a day with nothing a zero-height bar),
unknown costs marked and counted apart, attempts spent and refunded from the runs, coder
names as untrusted text, and a bad range a 400."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from support.dashboard import BASE, credentials, log_in
from support.ledger_driver import Driver, Wave
from support.postgres import create_database, drop_database
from support.repo import git
from support.usage_journal import PRICED_COST, fill, report
from typer.testing import CliRunner

from assay.adapters.store.sql import Ledger
from assay.cli.app import build_app
from assay.core.settle import Verdict
from assay.core.usage import MAX_COUNT, UsageFigures
from assay.core.vocab import RunStatus
from assay.web.app import create_app
from assay.web.config import WebConfig

NOW = datetime.now(UTC)
TODAY = NOW.date()
HOSTILE = '<script>alert("x")</script>\u202eevil'


def build(ledger: Ledger) -> None:
    """``support.usage_journal``'s journal, and: a run refunded two days ago (quota) whose
    coder has a hostile name, a run still open today, and ``t-long``'s dispatch that first
    reported 40 days ago and again yesterday (before the default range, still in it)."""
    fill(ledger, NOW)
    two_days = NOW - timedelta(days=2)
    driver = Driver(ledger, start=two_days)
    driver.add("t-quota")
    task = driver.start("t-quota", "r-quota")
    report(ledger, driver.now(), "t-quota", "r-quota", "a1.s1", HOSTILE,
           UsageFigures(2_000, 100, 0.02, "m"), seat=1)  # fmt: skip
    verdict = Verdict(status=RunStatus.STALLED, quota_hit=True)
    ledger.close_run(driver.close_for(task, "r-quota", verdict, (Wave(),)))
    driver = Driver(ledger, start=NOW - timedelta(days=41))
    driver.add("t-long")
    driver.start("t-long", "r-long")
    report(ledger, NOW - timedelta(days=40), "t-long", "r-long", "a1.s1", "claude",
           UsageFigures(1_000, 10, 0.5, "m"), seat=1)  # fmt: skip
    report(ledger, NOW - timedelta(days=1), "t-long", "r-long", "a1.s1", "claude",
           UsageFigures(1_000, 10, 0.25, "m"), seat=1)  # fmt: skip


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for name in ("ASSAY_HOME", "ASSAY_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def ledger(repo: Path) -> Iterator[Ledger]:
    with Ledger.open(f"sqlite:///{repo / '.assay' / 'assay.db'}") as made:
        build(made)
        yield made


def client_of(ledger: Ledger, folder: Path) -> TestClient:
    config = WebConfig(ledger=ledger, credentials=credentials(folder))
    return TestClient(create_app(config), base_url=BASE, raise_server_exceptions=False)


def cli_usage(*args: str) -> dict[str, Any]:
    done = CliRunner().invoke(build_app("usage"), ["usage", "--json", *args])
    assert done.exit_code == 0, done.output
    document: dict[str, Any] = json.loads(done.stdout)
    return document


SPEND = (
    "dispatches",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "priced_cost_usd",
    "unpriced_dispatches",
    "unreported_dispatches",
)


def spend(entry: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(entry[k] for k in SPEND)


def test_the_page_sums_what_assay_usage_sums(client: TestClient) -> None:
    since = (TODAY - timedelta(days=45)).isoformat()  # every dispatch whole in the range
    page = client.get("/usage.json", params={"since": since}).json()
    assert (page["since"], page["until"]) == (since, TODAY.isoformat())
    coders = cli_usage("--by", "coder", "--since", since)
    assert {c["coder"]: spend(c) for c in page["coders"]} == {
        g["key"]: spend(g) for g in coders["groups"]
    }
    assert spend(page["total"]) == spend(coders["total"])
    days = {g["key"]: spend(g) for g in cli_usage("--by", "day", "--since", since)["groups"]}
    assert {d["day"]: spend(d) for d in page["days"] if d["dispatches"]} == days
    # Unknown costs: the llm coder's tokens without a cost, aider's no usage at all.
    total = page["total"]
    assert total["cost_usd"] is None
    assert total["priced_cost_usd"] == round(PRICED_COST + 0.02 + 0.75, 6)
    assert (total["unpriced_dispatches"], total["unreported_dispatches"]) == (1, 1)


def test_a_dispatch_counts_whole_in_the_range_it_first_reported_in(client: TestClient) -> None:
    """``t-long``'s claude dispatch reported 40 days ago and yesterday: the last 30 days leave
    it out, on the page and in ``assay usage --since`` alike; a range from 45 days ago has it
    whole (both reports) on the day of its first report, as ``assay usage --by day`` has."""
    page = client.get("/usage.json").json()
    since = page["since"]
    yesterday = (TODAY - timedelta(days=1)).isoformat()
    (day,) = (d for d in page["days"] if d["day"] == yesterday)
    assert (day["dispatches"], day["tokens_in"], day["cost_usd"]) == (0, 0, 0)
    coders = {g["key"]: spend(g) for g in cli_usage("--by", "coder", "--since", since)["groups"]}
    assert {c["coder"]: spend(c) for c in page["coders"]} == coders
    assert spend(page["total"]) == spend(cli_usage("--since", since)["total"])
    early = (TODAY - timedelta(days=45)).isoformat()
    page = client.get("/usage.json", params={"since": early}).json()
    first = (NOW - timedelta(days=40)).date().isoformat()
    (day,) = (d for d in page["days"] if d["day"] == first)
    assert (day["dispatches"], day["tokens_in"], day["cost_usd"]) == (1, 2_000, 0.75)
    (grouped,) = (
        g for g in cli_usage("--by", "day", "--since", early)["groups"] if g["key"] == first
    )
    assert spend(grouped) == spend(day)


def test_every_day_of_the_range_and_the_runs_by_what_they_cost(client: TestClient) -> None:
    page = client.get("/usage.json", params={"since": TODAY - timedelta(days=6)}).json()
    days = page["days"]
    assert [d["day"] for d in days] == [
        (TODAY - timedelta(days=n)).isoformat() for n in range(6, -1, -1)
    ]
    quiet = days[0]  # six days ago: nothing
    assert (quiet["runs"], quiet["dispatches"], quiet["cost_usd"], quiet["tokens"]) == (0, 0, 0, 0)
    refunded = days[4]  # two days ago: the quota run started, refunded
    assert (refunded["attempts_refunded"], refunded["attempts_spent"], refunded["runs"]) == (
        1,
        0,
        1,
    )
    three_ago = days[3]  # t-fix's r-1 started, still open
    assert (three_ago["runs_open"], three_ago["runs"]) == (1, 1)
    coders = {c["coder"]: c for c in page["coders"]}
    shown = coders[HOSTILE]
    assert (shown["attempts_refunded"], shown["runs"], shown["cost_usd"]) == (1, 1, 0.02)
    assert coders["llm"]["cost_usd"] is None and coders["llm"]["unpriced_dispatches"] == 1
    assert coders["aider"]["priced_cost_usd"] == 0 and coders["aider"]["unreported_dispatches"] == 1
    total = page["total"]
    assert (total["runs"], total["attempts_refunded"], total["runs_open"]) == (3, 1, 2)


def bars(html: str, chart: str) -> list[dict[str, str]]:
    """Each bar of one chart's SVG: its attributes."""
    found = re.search(rf'<figure class="chart-card card" id="{chart}">(.*?)</figure>', html, re.S)
    assert found, chart
    return [
        dict(re.findall(r'(data-[a-z]+)="([^"]*)"', attrs))
        for attrs in re.findall(r'<g class="bar[^"]*" ([^>]*)>', found.group(1))
    ]


def test_the_charts_draw_each_day_and_mark_unknown_costs(client: TestClient) -> None:
    done = client.get("/usage", params={"since": TODAY - timedelta(days=6), "until": TODAY})
    assert done.status_code == 200
    html = done.text
    cost = bars(html, "day-cost")
    assert len(cost) == 7
    assert cost[0] == {
        "data-label": (TODAY - timedelta(days=6)).isoformat()[5:],
        "data-values": "0.0",
    }
    marked = [b for b in cost if "data-unknown" in b]
    # Today: aider reported nothing (unknown); three days ago: the llm coder's tokens, no cost.
    assert [(b["data-label"], b["data-unknown"]) for b in marked] == [
        ((TODAY - timedelta(days=3)).isoformat()[5:], "1"),
        (TODAY.isoformat()[5:], "1"),
    ]
    # The known part: claude's $0.075 (on the day it first reported) and the judge's $0.0011.
    assert float(marked[0]["data-values"]) == pytest.approx(0.0761)
    assert len(bars(html, "day-runs")) == 7 and len(bars(html, "coder-cost")) == 5
    assert 'aria-labelledby="day-cost-title"' in html and "<details>" in html
    assert "cost unknown for 2 of" in html  # the total says why it is a lower bound
    assert '<a href="/usage"' in html and 'aria-current="page">Usage' in html


def test_a_coder_name_is_text_never_markup(client: TestClient) -> None:
    html = client.get("/usage").text
    assert "<script>alert" not in html and "\u202e" not in html
    shown = r"&#34;&lt;script&gt;alert(\&#34;x\&#34;)&lt;/script&gt;&lt;U+202E&gt;evil&#34;"
    assert f'data-label="{shown}"' in html and f'<th scope="row">{shown}</th>' in html


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"since": "yesterday"}, "since is a day (2026-11-01), not &#39;yesterday&#39;"),
        ({"until": "2026-13-01"}, "until is a day"),
        ({"since": "2026-11-30", "until": "2026-11-01"}, "is after until"),
        ({"since": "2020-01-01", "until": "2026-01-01"}, "at most 366 days"),
        ({"format": "xml"}, "format is html or json"),
    ],
)
def test_a_range_the_page_cannot_show_is_a_400(
    client: TestClient, params: dict[str, str], said: str
) -> None:
    done = client.get("/usage", params=params)
    assert done.status_code == 400 and said in done.text and "Bad request" in done.text
    if "format" not in params:  # /usage.json is JSON whatever it says
        as_json = client.get("/usage.json", params=params)
        assert as_json.status_code == 400 and "error" in as_json.json()


def test_an_empty_ledger_draws_zero_bars(tmp_path: Path) -> None:
    with (
        Ledger.open(f"sqlite:///{tmp_path / 'empty.db'}") as empty,
        client_of(empty, tmp_path / "config") as c,
    ):
        log_in(c)
        page = c.get("/usage.json?format=json").json()
        assert len(page["days"]) == 30 and page["coders"] == []
        assert page["total"]["cost_usd"] == 0 and page["total"]["runs"] == 0
        html = c.get("/usage").text
        assert len(bars(html, "day-cost")) == 30 and bars(html, "coder-cost") == []
        assert "nothing in this range" in html


def test_without_credentials_nothing_is_shown(ledger: Ledger, tmp_path: Path) -> None:
    with client_of(ledger, tmp_path / "config") as anonymous:
        for path in ("/usage", "/usage.json"):
            done = anonymous.get(path, follow_redirects=False)
            assert done.status_code in (303, 401), path
            assert "claude" not in done.text


@pytest.fixture
def postgres_ledger() -> Iterator[Ledger]:
    url = create_database()
    try:
        with Ledger.open(url) as made:
            build(made)
            yield made
    finally:
        drop_database(url)


def test_postgresql_sums_what_sqlite_sums(
    ledger: Ledger, postgres_ledger: Ledger, tmp_path: Path
) -> None:
    documents = []
    for one, name in ((ledger, "sqlite"), (postgres_ledger, "postgresql")):
        with client_of(one, tmp_path / name) as c:
            log_in(c)
            documents.append(c.get("/usage.json").json())
    assert documents[0] == documents[1]


def test_counts_past_64_bits_are_summed_not_a_failure(ledger: Ledger, client: TestClient) -> None:
    """Three dispatches at the most a report is counted at: their sum is past SQLite's
    integer ``sum()``; the page and ``assay usage`` still answer."""
    for dispatch in ("a1.s3", "a1.s4", "a1.s5"):
        report(ledger, NOW, "t-docs", "r-2", dispatch, "huge",
               UsageFigures(MAX_COUNT, MAX_COUNT, None, "m"), seat=3)  # fmt: skip
    page = client.get("/usage.json").json()
    (huge,) = (c for c in page["coders"] if c["coder"] == "huge")
    assert huge["tokens_in"] == pytest.approx(3 * MAX_COUNT) and huge["cost_usd"] is None
    assert client.get("/usage").status_code == 200
    (grouped,) = (g for g in cli_usage("--by", "coder")["groups"] if g["key"] == "huge")
    assert grouped["tokens"] == pytest.approx(6 * MAX_COUNT)
