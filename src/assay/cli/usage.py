"""``assay usage``: what the coders, judges and validators spent, from the usage journal.

The journal is summed per group by :func:`assay.adapters.store.usage_sums.usage_cells` (the
dashboard's usage page reads the same sums; ``--since`` keeps the dispatches that first reported
since then, each with all it spent) and ordered by :mod:`assay.core.usage_report`. It only reads:
where no ledger exists yet it says so and creates none.
"""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from assay.cli.workspace import Workspace, fail, print_json
from assay.core.vocab import UsageGrouping

if TYPE_CHECKING:
    import sqlalchemy as sa

    from assay.core.usage_report import UsageSummary

SINCE_FORMS = "a duration back from now (30m, 12h, 7d, 2w) or an ISO date or time (2026-12-01)"
_DURATION_LIKE = re.compile(r"\d+[smhdwSMHDW]?")

SinceFlag = Annotated[
    str | None,
    typer.Option(
        "--since",
        metavar="WHEN",
        help="Only dispatches that first reported since WHEN (each with all it spent): a duration "
        "back from now (30m, 12h, 7d, 2w) or an ISO date or time (UTC unless it says).",
    ),
]
ByFlag = Annotated[
    UsageGrouping,
    typer.Option(
        "--by",
        help="Sum per task, coder (judges and validators apart), model, or day (UTC, of a "
        "dispatch's first report).",
    ),
]


def usage(
    since: SinceFlag = None,
    by: ByFlag = UsageGrouping.TASK,
    json_output: Annotated[bool, typer.Option("--json", help="Machine-readable JSON.")] = False,
) -> None:
    """Tokens and money spent per task, coder, model or day; costs nobody reported are counted
    apart, never as $0.

    The cost column is the sum when every dispatch in the row reported a cost, "≥ $X" (the
    known part) when some did not, and "unknown" when none did; "unpriced" counts dispatches
    that reported tokens but no cost, "unreported" those that reported no usage at all.
    """
    cutoff = None
    if since is not None:
        try:
            cutoff = parse_since(since, datetime.now(UTC))
        except ValueError as exc:
            fail(f"--since: {exc}")
    from assay.adapters.store.usage_sums import usage_cells
    from assay.core.usage_report import UsageKey, summary_of

    workspace = Workspace.find()
    ledger = workspace.existing_ledger()
    summary = summary_of([], None, by)
    titles: dict[str, str] = {}
    if ledger is not None:
        with ledger.read() as conn:
            groups = usage_cells(conn, [UsageKey(by.value)], since=cutoff)
            total = usage_cells(conn, [], since=cutoff)
            summary = summary_of(groups, total[0] if total else None, by)
            if by is UsageGrouping.TASK:
                titles = _task_titles(conn)
    _print(summary, by, cutoff, titles, json_output, no_ledger=ledger is None)


def parse_since(text: str, now: datetime) -> datetime:
    """The moment ``--since`` names: a duration back from ``now`` (as ``gc --older-than``
    reads one) or an ISO date (its midnight UTC) or time (UTC unless it has an offset);
    ValueError, saying what is accepted, for anything else."""
    from assay.core.gc import parse_duration

    given = text.strip()
    if _DURATION_LIKE.fullmatch(given):
        return now - timedelta(seconds=parse_duration(given))  # its error says what is one
    try:
        moment = datetime.fromisoformat(given)
    except ValueError:
        raise ValueError(f"{text!r} is not {SINCE_FORMS}") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _print(
    summary: UsageSummary,
    by: UsageGrouping,
    cutoff: datetime | None,
    titles: dict[str, str],
    json_output: bool,
    *,
    no_ledger: bool,
) -> None:
    from assay.cli import usage_views

    since = cutoff.isoformat().replace("+00:00", "Z") if cutoff is not None else None
    if json_output:
        print_json(usage_views.summary_json(summary, by, since, titles))
    elif no_ledger:
        typer.echo("no usage journaled: no ledger here yet (nothing has been queued or run)")
    elif not summary.groups:
        typer.echo("no usage journaled" + (f" since {since}" if since else ""))
    else:
        sys.stdout.write(usage_views.summary_text(summary, by, titles))


def _task_titles(conn: sa.Connection) -> dict[str, str]:
    """The title of every task that journaled usage."""
    import sqlalchemy as sa

    from assay.adapters.store.schema import tasks
    from assay.adapters.store.schema import usage as journal

    spent = sa.select(journal.c.task_id).distinct()
    query = sa.select(tasks.c.id, tasks.c.title).where(tasks.c.id.in_(spent))
    return {str(task_id): str(title) for task_id, title in conn.execute(query)}
