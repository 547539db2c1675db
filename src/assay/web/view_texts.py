"""The parts of a run page and a task page that a coder, a validator, a judge or an operator
wrote, each named so the log view can open it whole (``/runs/RUN/text/FIELD``,
``/tasks/ID/text/FIELD``): a page shows their start and links here, never the whole text.

A part is named by where the page shows it, read back from the same view the page is built
from, so the log view shows exactly what the page cut:

- ``warning:I``: the run's I-th warning (0-based);
- ``seat-error:A.S``: the error of seat S of attempt A;
- ``finding:A.V.F``: finding F of the V-th validator verdict of attempt A (0-based both);
- ``why:A`` and ``failure:A.F``: attempt A's decision, and the F-th failure it recorded;
- ``judge:A.J.R`` and ``judge-error:A.J.R``: judge J's reasons (its error) in round R of
  attempt A's tally;
- ``rearm:K:NAME``: the evidence of the K-th re-arm in the history of the run's halt NAME;
- ``action:I`` (a task's): the reason of the I-th operator move on its page (0-based).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import TypeVar

import sqlalchemy as sa

from assay.adapters.store.schema import events
from assay.core.vocab import EventKind
from assay.web.view_judges import tally_view
from assay.web.view_models import AttemptView, RunView, TaskView

_T = TypeVar("_T")
_NUMBERS = re.compile(r"\d{1,9}(?:\.\d{1,9}){0,2}")


class RunPart(StrEnum):
    WARNING = "warning"
    SEAT_ERROR = "seat-error"
    FINDING = "finding"
    WHY = "why"
    FAILURE = "failure"
    JUDGE = "judge"
    JUDGE_ERROR = "judge-error"


TITLES = {
    RunPart.WARNING: "Warning",
    RunPart.SEAT_ERROR: "Seat error",
    RunPart.FINDING: "Finding",
    RunPart.WHY: "Decision",
    RunPart.FAILURE: "Failure",
    RunPart.JUDGE: "Judge's reasons",
    RunPart.JUDGE_ERROR: "Judge's error",
}
_ARITY = {
    RunPart.WARNING: 1,
    RunPart.SEAT_ERROR: 2,
    RunPart.FINDING: 3,
    RunPart.WHY: 1,
    RunPart.FAILURE: 2,
    RunPart.JUDGE: 3,
    RunPart.JUDGE_ERROR: 3,
}
ACTION = "action:"
JUDGE_PARTS = (f"{RunPart.JUDGE}:", f"{RunPart.JUDGE_ERROR}:")


def _parsed(field: str) -> tuple[RunPart, list[int]] | None:
    kind, sep, where = field.partition(":")
    if not sep or kind not in RunPart.__members__.values() or not _NUMBERS.fullmatch(where):
        return None
    part = RunPart(kind)
    numbers = [int(n) for n in where.split(".")]
    return (part, numbers) if len(numbers) == _ARITY[part] else None


def is_run_part(field: str) -> bool:
    return _parsed(field) is not None


def run_part(run: RunView, field: str) -> tuple[str, str | None]:
    """The title of the part ``field`` names and its text (None: the run has no such part)."""
    parsed = _parsed(field)
    if parsed is None:
        return "", None
    part, n = parsed
    title = f"{TITLES[part]} ({field.partition(':')[2]})"
    if part is RunPart.WARNING:
        return title, _at(run.warnings, n[0])
    attempt = next((a for a in run.attempts if a.attempt == n[0]), None)
    return title, None if attempt is None else _of_attempt(attempt, part, n[1:])


REARM = "rearm:"


def rearm_part(run: RunView, field: str) -> str | None:
    """The evidence ``rearm:K:NAME`` names, as text (a mapping's items one a line)."""
    number, sep, name = field.removeprefix(REARM).partition(":")
    if not field.startswith(REARM) or not sep or not number.isdigit() or len(number) > 9:
        return None
    halt = next((h for h in run.halts if h.name == name), None)
    item = _at(halt.history, int(number)) if halt else None
    said = item.get("evidence") if isinstance(item, dict) else None
    if isinstance(said, dict):
        return "\n".join(f"{k}: {v}" for k, v in said.items()) or None
    return str(said) if said else None


def judge_part(conn: sa.Connection, run_id: str, field: str) -> str | None:
    """A judge's reasons or error (``judge:A.J.R``, ``judge-error:A.J.R``) as the ledger holds
    them: the run page keeps the start of each, the log view shows the whole."""
    parsed = _parsed(field)
    if parsed is None or parsed[0] not in (RunPart.JUDGE, RunPart.JUDGE_ERROR):
        return None
    part, (attempt, judge, round_) = parsed
    rows = conn.execute(
        sa.select(events.c.data)
        .where(events.c.run_id == run_id, events.c.kind == EventKind.JUDGES_RANKED.value)
        .order_by(events.c.id.desc())
    )
    for (data,) in rows:  # the newest tally of the attempt, as the page reads it
        if isinstance(data, dict) and data.get("attempt") == attempt:
            tally = tally_view(attempt, data, whole=True)
            found = [j for j in tally.judges if (j.judge, j.round) == (judge, round_)]
            if not found:
                return None
            return found[0].reasons if part is RunPart.JUDGE else found[0].error
    return None


def _of_attempt(a: AttemptView, part: RunPart, n: list[int]) -> str | None:
    if part is RunPart.SEAT_ERROR:
        return next((s.error for s in a.seats if s.seat == n[0]), None)
    if part is RunPart.FINDING:
        verdict = a.validators[n[0]] if n[0] < len(a.validators) else None
        return None if verdict is None else _at(verdict.findings, n[1])
    if part is RunPart.WHY:
        return a.why
    if part is RunPart.FAILURE:
        return _at(a.failures, n[0])
    judges = a.tally.judges if a.tally else []
    judge = next((j for j in judges if (j.judge, j.round) == (n[0], n[1])), None)
    if judge is None:
        return None
    return judge.reasons if part is RunPart.JUDGE else judge.error


def task_part(task: TaskView, field: str) -> str | None:
    """The reason of the operator move ``action:I`` names (None: no such move or reason)."""
    where = field.removeprefix(ACTION)
    if not field.startswith(ACTION) or not where.isdigit() or len(where) > 9:
        return None
    move = _at(task.actions, int(where))
    return None if move is None else move.reason


def _at(items: list[_T], index: int) -> _T | None:
    return items[index] if 0 <= index < len(items) else None
