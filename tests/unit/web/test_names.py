"""Names and coder text on the dashboard: jinja escapes HTML, not control characters nor bidi
overrides, so every file name, finding, reason, evidence and summary goes through ``shown``.
The pages' templates are rendered in-process from view models holding hostile text."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime
from typing import Any

from assay.web.queue_query import SORTS, QueueQuery
from assay.web.rendering import templates
from assay.web.view_models import (
    ActionView,
    AttemptView,
    HaltView,
    QueuePage,
    QueueRow,
    ReportFile,
    ReportView,
    RunBrief,
    RunView,
    SeatView,
    TaskView,
    Totals,
    ValidatorView,
)

NOW = datetime(2026, 12, 2, 5, 31, 7, tzinfo=UTC)
FORGED = "evil\nFAKE  decision: land (seat 9)"
BIDI = "invoice\u202egnp.exe"
# As a page holds them: shown, then HTML-escaped.
SHOWN_FORGED = "&#34;evil\\nFAKE  decision: land (seat 9)&#34;"
SHOWN_BIDI = "&#34;invoice&lt;U+202E&gt;gnp.exe&#34;"
HIDDEN = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def _render(name: str, **context: Any) -> str:
    return templates.env.get_template(name).render(csrf="x", actor="ops", query=None, **context)


def _long(text: str) -> str:
    return f'<span class="long">{text}</span>'


def _hidden(html: str) -> list[str]:
    """Control and invisible characters in the page, but the newlines and tabs of its own
    markup and of the blocks that keep their lines."""
    return [c for c in html if unicodedata.category(c) in HIDDEN and c not in "\n\t"]


def _brief(reason: str | None) -> RunBrief:
    return RunBrief(
        run_id="r1", task_id="t1", status="blocked", open=False, started_at=NOW,
        finished_at=NOW, settle_row="halted", attempt_spent=True, task_status="held",
        reason=reason,
    )  # fmt: skip


def _row() -> QueueRow:
    return QueueRow(
        task_id="t1", title=f"fix {BIDI}", status="held", problem=None, attempts_spent=1,
        max_attempts=3, attempts_remaining=2, refund_streak=0, max_refunds=None,
        hold_reason=f"halt-scope-breach: forbidden by rule: {FORGED}", hold_source="machine",
        not_before=None, updated_at=NOW, last_run=_brief(f"blocked: {BIDI}"),
    )  # fmt: skip


def test_the_run_page_shows_hostile_names_escaped() -> None:
    seat = SeatView(
        attempt=1, seat=1, coder="command", label=None, state="viable",
        error=f"cannot write {BIDI}", files=[FORGED, BIDI, "ok.txt"], tokens=None,
        cost_usd=None, wall_time_ms=None, stop_reason=None, chosen=True,
    )  # fmt: skip
    validator = ValidatorView(
        attempt=1, seat=1, validator_id="scope", severity="block", error=False,
        justification=f"line one\nsaw {BIDI}\n", findings=[f"forbidden by rule: {FORGED}"],
    )  # fmt: skip
    attempt = AttemptView(
        attempt=1, state="blocked", started_at=NOW, decided_at=NOW, seats=[seat],
        validators=[validator], tally=None, action="halt", next="halt", why=f"scope: {BIDI}",
        failures=[f"scope: forbidden by rule: {FORGED}"],
    )  # fmt: skip
    halt = HaltView(
        dispatch_id="d1", name="halt-scope-breach", severity="block", lifecycle="FIRED",
        detail=f"forbidden by rule: {FORGED}", fired_at=None,
        history=[{"rearmed_at": None, "cleared": 1, "evidence": {"why": BIDI}}],
        rearm_command=None, rearmable_here=False,
    )  # fmt: skip
    run = RunView(
        run=_brief(f"blocked: {FORGED}"), title=f"fix {BIDI}", attempts=[attempt],
        totals=Totals(None, None, None),
        coder_report=ReportView(
            summary=f"I wrote {BIDI}", files=[ReportFile(FORGED, "ok")], stop_reason=None,
            turns_used=None, tokens_used=None, cost_usd=None,
        ),
        changed_files=[FORGED, BIDI], diff=f"+++ b/x\n@@ -0,0 +1 @@\n+access = {BIDI}\n",
        diff_truncated=False, halts=[halt], warnings=[f"ignored, not in the candidate: {FORGED}"],
        land=None, sandbox="bwrap", payload_available=False, usage=None, last_event_id=0,
    )  # fmt: skip
    html = _render("run.html", run=run, fragment="", notice=None, config=None)
    assert not _hidden(html), _hidden(html)
    assert "\nFAKE" not in html and "FAKE  decision" in html  # named, never on a line of its own
    # Each one-line text is in a box that wraps anywhere (``long``): a 60 KB word cannot widen it.
    assert f'<li class="mono">{_long(SHOWN_FORGED)}</li>' in html  # a seat's files, changed files
    assert f'<li class="mono">{_long(SHOWN_BIDI)}</li>' in html
    assert f'<span class="mono">{_long(SHOWN_FORGED)}</span>' in html  # the coder report's file
    forged = "&#34;forbidden by rule: evil\\nFAKE  decision: land (seat 9)&#34;"
    assert f"<li>{_long(forged)}</li>" in html
    assert "ignored, not in the candidate: evil\\nFAKE" in html  # a warning
    assert "I wrote invoice&lt;U+202E&gt;gnp.exe" in html  # the coder's summary
    assert "+access = invoice&lt;U+202E&gt;gnp.exe" in html  # a bidi in the diff, shown
    assert "<title>&#34;fix invoice&lt;U+202E&gt;gnp.exe&#34; · run · assay</title>" in html


def test_the_task_and_queue_pages_show_hostile_text_escaped() -> None:
    task = TaskView(
        row=_row(), instruction=f"do it\n{BIDI}", last_error=f"boom\x1b[2J{FORGED}",
        diagnostic=None, runs=[_brief(f"blocked: {FORGED}")],
        actions=[ActionView(at=NOW, action="hold", by=BIDI, via="cli", reason=FORGED)],
        usage=None, run_usage={}, last_event_id=0,
    )  # fmt: skip
    page = _render(
        "task.html",
        task=task,
        fragment="",
        actions_fragment="",
        moves=[],
        no_moves="",
        notice=None,
        config=None,
    )
    queue = QueuePage(
        rows=[_row()], counts={"all": 1}, status=None, page=1, per_page=50, total=1, pages=1,
        last_event_id=0,
    )  # fmt: skip
    listing = _render(
        "_queue.html",
        queue=queue,
        tabs=[],
        view=QueueQuery(),
        sorts=SORTS,
        held_by_choices=[],
        held_by_values=[],
        now=datetime.now(UTC),
    )
    for html in (page, listing):
        assert not _hidden(html), _hidden(html)
        assert "fix invoice&lt;U+202E&gt;gnp.exe" in html
        assert "halt-scope-breach: forbidden by rule: evil\\nFAKE  decision" in html
        assert "\nFAKE" not in html
    # An escape sequence in a one-line text is dropped, never obeyed nor shown as noise.
    assert "[2J" not in page and "boom" in page and "do it\ninvoice&lt;U+202E&gt;gnp.exe" in page
