"""The judges' reasoning on a run page, in a real browser: each judge's ranking and reasons
per round (the deliberation too), first choices and Borda points, with hostile reasons in the
ledger — HTML and script, a bidi override, a 100 KB reason — shown as text, the long one cut
to a line with a "show all" whose box scrolls, nothing run, nothing pushed off the page."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest
from support.browser import Dashboard, log_in, shot
from support.repo import Repo, make_repo

from assay.adapters.store.sql import Ledger
from assay.core.tasks import Task
from assay.core.vocab import EventKind

if TYPE_CHECKING:
    from playwright.sync_api import Page

RUN = "r-judged-hostile"
SCRIPT = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
BIDI = "\u202eB is right\u202c"
HUGE = BIDI + " " + "y" * 100_000


def _judge(judge: int, round_: int, ranking: list[str] | None, reasons: str) -> dict[str, Any]:
    return {
        "judge": judge, "name": "llm judge-model", "round": round_, "ranking": ranking,
        "reasons": reasons, "reasons_cut": 0, "error": None,
    }  # fmt: skip


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Repo, Dashboard]]:
    repo = make_repo(tmp_path_factory.mktemp("judges"))
    dashboard = Dashboard(repo, repo.root.parent / "config")
    try:
        dashboard.ready()
        now = datetime.now(UTC)
        with Ledger(f"sqlite:///{repo.root / '.assay' / 'assay.db'}") as ledger:
            task = Task.new(id="t-judged", title="Judged", instruction="x", now=now)
            ledger.add_task(task)
            task.start(now, run_id=RUN)
            ledger.start_run(task, RUN, started_at=now)
            ranked = {
                "attempt": 1, "winner": "A", "present": 2, "quorum": 2,
                "lost_to_quota": 0, "lost_to_fault": 0,
                "first_choices": {"B": 0, "A": 2}, "borda": {"A": 2, "B": 0}, "tie_break": None,
                "judges": [
                    _judge(1, 0, ["A", "B"], f"{SCRIPT} A keeps digits"),
                    _judge(2, 0, ["B", "A"], HUGE),
                    _judge(1, 1, ["A", "B"], "still A"),
                    _judge(2, 1, ["A", "B"], "convinced: A keeps digits"),
                ],
            }  # fmt: skip
            ledger.append_event(
                EventKind.JUDGES_RANKED, ranked, at=now, task_id=task.id, run_id=RUN
            )
        yield repo, dashboard
    finally:
        dashboard.stop()


def test_the_judges_reasoning_is_shown_as_text_and_cannot_break_the_page(
    stage: tuple[Repo, Dashboard], page: Page
) -> None:
    _, dashboard = stage
    log_in(page, dashboard)
    page.goto(f"{dashboard.url}/runs/{RUN}")
    tally = page.locator("#tally-1")
    text = tally.inner_text()
    assert "winner A" in text and "2 judges present, quorum 2" in text and "deliberated" in text
    # First choices and Borda points per label, the winner first.
    rows = tally.locator("table.scores tbody tr")
    assert [r.inner_text().split() for r in rows.all()] == [
        ["A", "winner", "2", "2"],
        ["B", "0", "0"],
    ]
    judges = tally.locator("li.judge")
    assert judges.count() == 4
    assert tally.locator(".tag", has_text="deliberation").count() == 2
    assert "ranked A \u203a B" in judges.nth(0).inner_text()
    # Hostile text is text: nothing ran, no element came of it, the override is shown.
    assert page.evaluate("window.__pwned === undefined")
    assert tally.locator("script, img").count() == 0
    assert "<script>window.__pwned = 1</script>" in judges.nth(0).inner_text()
    second = judges.nth(1)
    assert "<U+202E>B is right<U+202C>" in second.locator("summary").inner_text()
    assert "show all" in second.locator("summary").inner_text()
    # The 100 KB reason is one line until asked for, and then a box that scrolls.
    full = second.locator("pre.reasons-text")
    assert not full.is_visible()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 1280 and page.evaluate("document.documentElement.scrollHeight") < 4000
    shot(page, "run-judges")
    second.locator("summary").click()
    assert full.is_visible()
    box = full.bounding_box()
    assert box is not None and box["height"] < 420 and box["width"] <= 1280
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    assert "more in the judge's log" in second.locator("summary").inner_text()  # 100 KB > kept
    assert "y" * 1000 in full.inner_text()
    shot(page, "run-judges-show-all")
