"""What the usage page shows, as its URL says it: a range of whole UTC days and a form.

``?since=2026-11-01&until=2026-11-30`` (both included; default the last 30 days to today,
UTC), ``&format=json`` for scripts. A value the page cannot show is a :class:`BadQuery` (a 400
page that says which part and why).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from urllib.parse import urlencode

from assay.web.queue_query import BadQuery

__all__ = ["DEFAULT_DAYS", "MAX_DAYS", "BadQuery", "UsageQuery"]

DEFAULT_DAYS = 30
MAX_DAYS = 366  # a year of bars is as many as a chart can draw apart
FORMATS = ("html", "json")


@dataclass(frozen=True)
class UsageQuery:
    since: date
    until: date
    format: str = "html"

    @classmethod
    def of(cls, params: dict[str, str], today: date) -> UsageQuery:
        """Read from a request's query parameters (a blank value is the default)."""
        since, until = _day(params.get("since"), "since"), _day(params.get("until"), "until")
        if until is None:
            until = today if since is None or since <= today else since
        if since is None:
            since = until - timedelta(days=DEFAULT_DAYS - 1)
        if since > until:
            raise BadQuery(f"since ({since}) is after until ({until}): the range is empty.")
        if (until - since).days + 1 > MAX_DAYS:
            raise BadQuery(
                f"The usage page shows at most {MAX_DAYS} days at once, not "
                f"{(until - since).days + 1} ({since} to {until})."
            )
        shown = (params.get("format") or "html").strip().lower()
        if shown not in FORMATS:
            raise BadQuery(f"format is html or json, not {params.get('format')!r}.")
        return cls(since, until, shown)

    @property
    def dates(self) -> list[str]:
        """Every day of the range, ISO, in order."""
        days = (self.until - self.since).days + 1
        return [(self.since + timedelta(days=n)).isoformat() for n in range(days)]

    def last(self, days: int) -> str:
        """The query string of the ``days`` days that end with this range's last."""
        return self.link(since=self.until - timedelta(days=days - 1))

    def link(self, *, since: date | None = None, until: date | None = None, **extra: str) -> str:
        """The page's query string for another range (this one by default)."""
        params = {
            "since": (since or self.since).isoformat(),
            "until": (until or self.until).isoformat(),
            **extra,
        }
        return "?" + urlencode(params)


def _day(value: str | None, name: str) -> date | None:
    if not value or not value.strip():
        return None
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise BadQuery(f"{name} is a day (2026-11-01), not {value[:100]!r}.") from None
