"""Every long text a run page or a task page shows that a coder, a validator, a judge or an
operator wrote (warnings, seat errors, findings, decisions, failures, judges' reasons and
errors, operators' reasons) is cut on the page, and its "show all" opens it whole in the log
view: never unfolded in place. In-process, over a SQLite ledger."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from html import unescape
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from support.dashboard import BASE, credentials, log_in

from assay.adapters.store.sql import Ledger
from assay.core.vocab import EventKind
from assay.web.app import create_app
from assay.web.config import WebConfig

sys.path.insert(0, str(Path(__file__).parents[2] / "support"))

from ledger_driver import Driver

NOW = datetime.now(UTC)
# 100 KB each: far past what a page may unfold in place (64 KB), each with its own marker.
BIG = {
    kind: f"{kind}-start <script>window.x=1</script>\u202e" + "w" * 100_000 + f" {kind}-end"
    for kind in ("warning", "seat-error", "finding", "why", "failure", "judge", "judge-error",
                 "action")
}  # fmt: skip
LINKS = {
    "warning": "/runs/r1/text/warning%3A0",
    "seat-error": "/runs/r1/text/seat-error%3A1.1",
    "finding": "/runs/r1/text/finding%3A1.0.1",
    "why": "/runs/r1/text/why%3A1",
    "failure": "/runs/r1/text/failure%3A1.0",
    "judge": "/runs/r1/text/judge%3A1.2.0",
    "judge-error": "/runs/r1/text/judge-error%3A1.2.0",
}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with Ledger.open(f"sqlite:///{tmp_path / 'assay.db'}") as ledger:
        driver = Driver(ledger, start=NOW - timedelta(hours=1))
        driver.add("t1")
        driver.start("t1", "r1")

        def event(kind: EventKind, data: dict[str, object]) -> None:
            ledger.append_event(kind, data, at=driver.now(), task_id="t1", run_id="r1")

        event(EventKind.WARNING, {"message": BIG["warning"]})
        event(EventKind.SEAT_FINISHED, {"attempt": 1, "seat": 1, "error": BIG["seat-error"]})
        event(
            EventKind.VALIDATOR_FINISHED,
            {"attempt": 1, "seat": 1, "validator": "v", "severity": "block",
             "findings": ["short", BIG["finding"]]},
        )  # fmt: skip
        judge = {"judge": 2, "name": "m", "round": 0, "ranking": ["A"], "reasons_cut": 0}
        event(
            EventKind.JUDGES_RANKED,
            {"attempt": 1, "winner": "A", "present": 1, "quorum": 1,
             "judges": [{**judge, "reasons": BIG["judge"], "error": BIG["judge-error"]}]},
        )  # fmt: skip
        event(
            EventKind.ATTEMPT_DECIDED,
            {"attempt": 1, "why": BIG["why"], "failures": [BIG["failure"]]},
        )
        ledger.append_event(
            EventKind.TASK_SAVED,
            {"action": "hold", "reason": BIG["action"], "by": "op", "via": "web"},
            at=driver.now(),
            task_id="t1",
        )
        config = WebConfig(ledger=ledger, credentials=credentials(tmp_path / "config"))
        with TestClient(create_app(config), base_url=BASE, raise_server_exceptions=False) as c:
            log_in(c)
            yield c


def _cut_here(html: str, kind: str, link: str) -> None:
    assert f"{kind}-start" in html, kind
    assert f"{kind}-end" not in html, f"{kind} unfolded in place"
    assert f'href="{link}"' in html, f"{kind}: no show all to {link}"
    assert "<script>window.x" not in html


def test_every_long_part_of_a_run_page_is_cut_and_opens_whole(client: TestClient) -> None:
    page = client.get("/runs/r1")
    assert page.status_code == 200
    assert len(page.text) < 150_000  # seven 100 KB texts: none of them whole
    for kind, link in LINKS.items():
        if kind != "judge":  # a judge's reasons unfold (20 KB kept) and link to the whole
            _cut_here(page.text, kind, link)
        else:
            assert f'href="{link}"' in page.text
        whole = client.get(link)
        assert whole.status_code == 200, kind
        assert f"{kind}-end" in unescape(whole.text), kind
        assert "<script>window.x" not in whole.text
        assert "&lt;U+202E&gt;" in whole.text or "U+202E" in unescape(whole.text)
        assert client.get(link + "?download=1").text == BIG[kind]


def test_an_operators_long_reason_is_cut_on_the_task_page_and_opens_whole(
    client: TestClient,
) -> None:
    page = client.get("/tasks/t1")
    _cut_here(page.text, "action", "/tasks/t1/text/action%3A0")
    assert client.get("/tasks/t1/text/action%3A0?download=1").text == BIG["action"]


@pytest.mark.parametrize(
    "path",
    [
        "/runs/r1/text/warning:1",  # no second warning
        "/runs/r1/text/seat-error:1.9",
        "/runs/r1/text/finding:1.0.2",
        "/runs/r1/text/finding:1.5.0",
        "/runs/r1/text/why:7",
        "/runs/r1/text/judge:1.1.0",
        "/runs/r1/text/warning:-1",
        "/runs/r1/text/warning:1.2",  # the wrong number of places
        "/runs/r1/text/warning:" + "9" * 40,
        "/runs/r1/text/nothing:1",
        "/runs/nope/text/warning:0",
        "/tasks/t1/text/action:1",
        "/tasks/t1/text/action:x",
        "/tasks/nope/text/action:0",
    ],
)
def test_a_part_that_is_not_there_is_a_404(client: TestClient, path: str) -> None:
    got = client.get(path)
    assert got.status_code == 404
    assert re.search(r"has no .* to show", unescape(got.text))


def test_a_re_arms_long_evidence_is_cut_and_opens_whole() -> None:
    """A halt's history keeps each re-arm's evidence (a coder's, of any size): the run page
    shows its start and links the whole, which the text route reads from the run's view."""
    from assay.web.rendering import templates
    from assay.web.view_models import HaltView, RunBrief, RunView, Totals
    from assay.web.view_texts import rearm_part

    evidence = {"why": "rearm-start " + "e" * 100_000 + " rearm-end", "by": "ops"}
    halt = HaltView(
        dispatch_id="d1", name="halt-scope-breach", severity="block", lifecycle="FIRED",
        detail="x", fired_at=None, rearm_command=None, rearmable_here=False,
        history=[{"rearmed_at": None, "cleared": 1, "evidence": "short"},
                 {"rearmed_at": None, "cleared": 2, "evidence": evidence}],
    )  # fmt: skip
    brief = RunBrief(
        run_id="r1", task_id="t1", status="blocked", open=False, started_at=NOW,
        finished_at=NOW, settle_row="halted", attempt_spent=True, task_status="held", reason=None,
    )  # fmt: skip
    run = RunView(
        run=brief, title="t", attempts=[], totals=Totals(None, None, None), coder_report=None,
        changed_files=[], diff=None, diff_truncated=False, halts=[halt], warnings=[],
        land=None, sandbox=None, payload_available=False, usage=None, last_event_id=0,
    )  # fmt: skip
    html = templates.env.get_template("run.html").render(
        csrf="x", actor="ops", query=None, run=run, fragment="", notice=None, config=None
    )
    assert "rearm-start" in html and "rearm-end" not in html
    link = "/runs/r1/text/rearm%3A1%3Ahalt-scope-breach"
    assert f'href="{link}"' in html
    whole = rearm_part(run, "rearm:1:halt-scope-breach")
    assert whole is not None and whole.endswith(" rearm-end\nby: ops")
    assert rearm_part(run, "rearm:0:halt-scope-breach") == "short"
    for missing in ("rearm:2:halt-scope-breach", "rearm:0:other", "rearm:x:halt-scope-breach"):
        assert rearm_part(run, missing) is None
