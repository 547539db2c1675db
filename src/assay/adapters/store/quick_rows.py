"""A task as the quick read path reads it (:mod:`.quick_read`): the attributes ``task
list``'s sentences use, and the JSON the model's ``model_dump(mode="json")`` writes.

Plain classes: ``dataclasses`` imports ``inspect`` and the tokenizer, a tenth of what
``ledger show`` may take in all.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from assay.core.vocab import HoldSource, TaskStatus


class NotQuick(Exception):
    """This read is the Ledger's to answer (see :mod:`.quick_read` for when)."""


class TaskRow:
    """A task as :class:`assay.core.tasks.Task` reads it, without pydantic: the attributes and
    ``waiting`` the task commands' sentences use, and :meth:`as_json` its ``model_dump``."""

    __slots__ = (
        "attempts",
        "diagnostic",
        "hold_reason",
        "hold_source",
        "id",
        "instruction",
        "last_error",
        "not_before",
        "run_ids",
        "status",
        "stored_created_at",  # as stored, checked: a list prints 10,000 of each
        "stored_updated_at",
        "title",
    )

    def __init__(
        self,
        id: str,
        title: str,
        instruction: str,
        status: TaskStatus,
        attempts: int,
        last_error: str | None,
        hold_reason: str | None,
        hold_source: HoldSource | None,
        diagnostic: str | None,
        run_ids: list[str],
        not_before: datetime | None,
        stored_created_at: str,
        stored_updated_at: str,
    ) -> None:
        self.id = id
        self.title = title
        self.instruction = instruction
        self.status = status
        self.attempts = attempts
        self.last_error = last_error
        self.hold_reason = hold_reason
        self.hold_source = hold_source
        self.diagnostic = diagnostic
        self.run_ids = run_ids
        self.not_before = not_before
        self.stored_created_at = stored_created_at
        self.stored_updated_at = stored_updated_at

    @property
    def created_at(self) -> datetime:
        return parse_time(self.stored_created_at)

    @property
    def updated_at(self) -> datetime:
        return parse_time(self.stored_updated_at)

    def waiting(self, now: datetime) -> bool:
        return self.not_before is not None and now < self.not_before

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "instruction": self.instruction,
            "status": self.status.value,
            "attempts": self.attempts,
            "last_error": self.last_error,
            "hold_reason": self.hold_reason,
            "hold_source": self.hold_source.value if self.hold_source else None,
            "diagnostic": self.diagnostic,
            "run_ids": list(self.run_ids),
            "not_before": json_time(self.not_before),
            "created_at": json_stored_time(self.stored_created_at),
            "updated_at": json_stored_time(self.stored_updated_at),
        }


def parse_time(value: object) -> datetime:
    """A stored time as ``schema.UTCDateTime`` reads it (SQLAlchemy parses with
    ``fromisoformat``): naive is UTC, an offset is converted to UTC."""
    try:
        parsed = datetime.fromisoformat(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise NotQuick(f"{value!r} is not a stored time") from exc
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def checked_time(value: object) -> str:
    """A stored time :func:`_time` reads, kept as stored."""
    try:
        datetime.fromisoformat(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise NotQuick(f"{value!r} is not a stored time") from exc
    return value  # type: ignore[return-value]


def json_stored_time(value: str) -> str:
    """:func:`_json_time` of a stored time; the form SQLAlchemy writes
    (``2026-01-02 03:04:05.000000``, naive UTC) is rewritten without parsing it."""
    if len(value) == 26 and value[10] == " " and value[19] == ".":
        fraction = "" if value.endswith(".000000") else value[19:]
        return f"{value[:10]}T{value[11:19]}{fraction}Z"
    return json_time(parse_time(value))  # type: ignore[return-value]


def json_time(value: datetime | None) -> str | None:
    """A UTC time as pydantic's JSON mode writes it: ``2026-01-02T03:04:05[.ffffff]Z``."""
    if value is None:
        return None
    return value.isoformat().replace("+00:00", "Z")
