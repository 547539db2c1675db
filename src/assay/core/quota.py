"""A provider's "not now": the one quota type, from the adapter that reads it, across the
effect boundary, to settle's refund."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import AwareDatetime


@dataclass(frozen=True)
class Quota:
    """A provider said "not now": a rate or usage limit, with its reset time when it gave one."""

    kind: str  # "rate_limit" | "usage_limit"
    detail: str
    reset_at: AwareDatetime | None = None  # aware, as every time core holds
