"""What the queue shows, as its URL says it: a text search, filters, a sort and a page.

Everything is in the query string (``?q=flaky&status=failed&coder=claude&since=2026-01-01
&sort=updated&dir=asc&page=2``), so a view can be bookmarked and shared; a link that changes
one thing keeps the rest (:meth:`QueueQuery.link`). :meth:`QueueQuery.where` and
:meth:`QueueQuery.order` are the SQL it stands for.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

import sqlalchemy as sa

from assay.adapters.store import task_totals
from assay.adapters.store.schema import stage_records, tasks
from assay.web.held_by import HeldBy, held_by_filter

SORTS = {
    "created": "Created",
    "updated": "Updated",
    "attempts": "Attempts",
    "cost": "Cost",
    "duration": "Run time",
}
ATTEMPTS = sa.func.coalesce(stage_records.c.attempts, 0)
ESCAPE = "/"  # LIKE's escape character (a backslash is one more thing to quote in SQL text)
MAX_SEARCH = 200  # characters of a search or a coder filter kept


class BadQuery(ValueError):
    """A query string the queue cannot show (its message says which part and why)."""


@dataclass(frozen=True)
class QueueQuery:
    """The queue's view: ``q`` searched in titles, hold reasons and last errors; ``status``;
    ``coder`` (a coder kind, or the start of a model name, in the task's contract); created
    ``since``/``until`` (whole UTC days, both included); ``held_by`` (who holds a held task:
    :class:`assay.web.held_by.HeldBy`); ``sort`` (``created``, ``updated``, ``attempts``,
    ``cost``: the known cost, ``duration``: the closed runs' time) and ``dir``; ``page``."""

    q: str = ""
    status: str | None = None
    coder: str = ""
    held_by: str = ""
    since: date | None = None
    until: date | None = None
    sort: str = "created"
    dir: str = "desc"
    page: int = 1

    @classmethod
    def of(cls, params: dict[str, str], statuses: list[str]) -> QueueQuery:
        """Read from a request's query parameters; :class:`BadQuery` for a value that is none
        of the known ones (a blank one is no filter)."""
        status = params.get("status") or None
        if status is not None and status not in statuses:
            raise BadQuery(
                f"There is no task status {status!r}; the statuses are {', '.join(statuses)}."
            )
        sort = params.get("sort") or "created"
        if sort not in SORTS:
            raise BadQuery(f"The queue sorts by {', '.join(SORTS)}, not {sort!r}.")
        direction = params.get("dir") or "desc"
        if direction not in ("asc", "desc"):
            raise BadQuery(f"A sort's direction is asc or desc, not {direction!r}.")
        return cls(
            q=" ".join((params.get("q") or "").split())[:MAX_SEARCH],
            status=status,
            coder=(params.get("coder") or "").strip()[:MAX_SEARCH],
            held_by=HeldBy.parse(params.get("held_by") or "", BadQuery),
            since=_day(params.get("since"), "since"),
            until=_day(params.get("until"), "until"),
            sort=sort,
            dir=direction,
            page=_page(params.get("page")),
        )

    @property
    def filtered(self) -> bool:
        """Whether anything but the status narrows the queue (then its total is counted)."""
        return bool(self.q or self.coder or self.since or self.until or self.held_by)

    def link(self, **changes: Any) -> str:
        """This view's query string with ``changes`` (a filter's change starts at page 1),
        without the defaults, so links stay short: ``?status=held&sort=updated``."""
        if "page" not in changes:
            changes["page"] = 1 if changes else self.page
        view = replace(self, **changes)
        kept = {}
        for f in fields(view):
            value = getattr(view, f.name)
            if value in (None, "") or value == f.default:
                continue
            kept[f.name] = value.isoformat() if isinstance(value, date) else value
        return "?" + urlencode(kept) if kept else ""

    def sort_link(self, column: str) -> str:
        """The link a column's header is: sort by it, newest/most first; again: flip it."""
        flip = "asc" if self.dir == "desc" else "desc"
        return self.link(sort=column, dir=flip if self.sort == column else "desc")

    def where(self, dialect: str) -> sa.ColumnElement[bool]:
        """The filters but the status (:func:`assay.web.view_queue.status_filter` reads it)."""
        found: list[sa.ColumnElement[bool]] = []
        if self.q:
            columns = (tasks.c.title, tasks.c.hold_reason, tasks.c.last_error, tasks.c.id)
            found.append(sa.or_(*(_contains(c, self.q, dialect) for c in columns)))
        if self.coder:
            found.append(_coder_is(self.coder, dialect))
        if self.since:
            found.append(tasks.c.created_at >= datetime.combine(self.since, time(), UTC))
        if self.until:
            end = datetime.combine(self.until + timedelta(days=1), time(), UTC)
            found.append(tasks.c.created_at < end)
        if self.held_by:
            found.append(held_by_filter(self.held_by, dialect))
        return sa.and_(sa.true(), *found)

    def order(self) -> tuple[sa.ColumnElement[Any], ...]:
        """The sort, then created and id (so equal keys keep one order, page after page)."""
        key: sa.ColumnElement[Any] = {
            "created": tasks.c.created_at,
            "updated": tasks.c.updated_at,
            "attempts": ATTEMPTS,
            "cost": tasks.c.cost_usd,
            "duration": tasks.c.run_seconds,
        }[self.sort]
        if self.dir == "asc":
            tail = (tasks.c.created_at.asc(), tasks.c.id.asc())
            return (key.asc(), *tail) if self.sort != "created" else tail
        tail = (tasks.c.created_at.desc(), tasks.c.id.desc())
        return (key.desc(), *tail) if self.sort != "created" else tail

    @property
    def joins_stages(self) -> bool:
        return self.sort == "attempts"


def _coder_is(coder: str, dialect: str) -> sa.ColumnElement[bool]:
    """The task's contract names ``coder`` as a coder's kind, or a model starting with it (one
    coder or a list), as its stored ``coders`` (``|kind=claude|model=opus-4|``) says."""
    sep = task_totals.CODERS_SEPARATOR
    return sa.or_(
        _contains(tasks.c.coders, f"{sep}kind={coder}{sep}", dialect),
        _contains(tasks.c.coders, f"{sep}model={coder}", dialect),
    )


def _contains(column: sa.ColumnElement[Any], text: str, dialect: str) -> sa.ColumnElement[bool]:
    """``column`` holds ``text``, whatever its case (a ``%`` or ``_`` in it is itself). SQLite's
    LIKE ignores ASCII case already: a ``lower()`` of each row would double a scan's time."""
    escaped = text.replace(ESCAPE, ESCAPE * 2).replace("%", ESCAPE + "%").replace("_", ESCAPE + "_")
    pattern = f"%{escaped}%"
    if dialect == "sqlite":
        return column.like(pattern, escape=ESCAPE)
    return column.ilike(pattern, escape=ESCAPE)


def _day(value: str | None, name: str) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise BadQuery(f"{name} is a day (2026-12-02), not {value!r}.") from None


def _page(value: str | None) -> int:
    if not value:
        return 1
    if not value.isdigit() or not 1 <= int(value) <= 1_000_000:
        raise BadQuery(f"page is a number from 1, not {value!r}.")
    return int(value)
