"""The judges' tally of one attempt as its ``judges.ranked`` event holds it: the winner, the
quorum, first choices and Borda points per blind label, and each judge's ranking and reasons
per round (a deliberation is a round after the first).

The event is the ledger's, but what a judge said is not: a judge is a model shown what the
coders wrote, so its reasons (and anything it put in a ranking) are untrusted text, read here
with every shape checked and every size bounded, and shown by the page through ``shown``.
"""

from __future__ import annotations

from typing import Any

from assay.web.view_models import JudgeView, TallyView

MAX_JUDGES = 64  # answers read per attempt (judges x rounds)
MAX_LABELS = 26  # blind labels A..Z
MAX_REASONS = 20_000  # what the engine keeps of a judge's reasons


def tally_view(attempt: int, data: dict[str, Any], whole: bool = False) -> TallyView:
    """The attempt's tally from its ``judges.ranked`` event; a field it does not hold well
    reads as unknown (an older event has neither scores nor judges). ``whole``: each judge's
    reasons and error as the ledger holds them (the log view's), not cut for a page."""
    present, quorum = _int(data.get("present")) or 0, _int(data.get("quorum")) or 0
    winner = data.get("winner") if isinstance(data.get("winner"), str) else None
    raw = data.get("judges")
    answers = raw[:MAX_JUDGES] if isinstance(raw, list) else []
    return TallyView(
        attempt=attempt,
        winner=winner,
        present=present,
        quorum=quorum,
        met=present >= (quorum or 1) and winner is not None,
        votes=_scores(data.get("first_choices")),
        borda=_scores(data.get("borda")),
        tie_break=_text(data.get("tie_break"), 40),
        judges=[j for j in (_judge(a, whole) for a in answers) if j is not None],
    )


def _judge(value: Any, whole: bool = False) -> JudgeView | None:
    if not isinstance(value, dict) or _int(value.get("judge")) is None:
        return None
    ranking = value.get("ranking")
    labels = [str(v)[:40] for v in ranking[:MAX_LABELS]] if isinstance(ranking, list) else None
    said = value.get("reasons")
    reasons = said if isinstance(said, str) else ""
    keep = len(reasons) if whole else MAX_REASONS
    over = max(0, len(reasons) - keep)  # a ledger holding more than the engine keeps
    return JudgeView(
        judge=_int(value.get("judge")) or 0,
        name=_text(value.get("name"), 200) or "judge",
        round=max(0, _int(value.get("round")) or 0),
        ranking=labels,
        reasons=reasons[:keep],
        reasons_cut=max(0, _int(value.get("reasons_cut")) or 0) + over,
        error=_text(value.get("error"), 1 << 62 if whole else 4000),
    )


def _scores(value: Any) -> list[tuple[str, int]]:
    """Label -> count, best first (then by label), as the page lists them."""
    if not isinstance(value, dict):
        return []
    pairs = [(str(k)[:40], n) for k, v in value.items() if (n := _int(v)) is not None]
    return sorted(pairs, key=lambda pair: (-pair[1], pair[0]))[:MAX_LABELS]


def _text(value: Any, limit: int) -> str | None:
    return value[:limit] if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
