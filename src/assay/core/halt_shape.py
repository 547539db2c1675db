"""Reading the fields of a decoded JSON object, with one-line messages that name the field.

The halt state file's entries are validated by hand with these (rather than by a pydantic
model) so that ``assay halt check``, which a coder calls in the middle of its turn, starts in
a few interpreter start-ups. Each reader raises :class:`HaltShapeError` on the first problem.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is an import `assay halt check` does without (assay.core.frozen)
if TYPE_CHECKING:
    from enum import StrEnum
    from typing import Any, TypeVar

    _Member = TypeVar("_Member", bound=StrEnum)


class HaltShapeError(ValueError):
    """A halt entry that does not have the state file's halt shape.

    ``where`` is the path inside the entry (``severity``, ``history[0].rearmed_at``; empty for
    the entry itself), so a caller can say ``halts[3].severity: …``.
    """

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}" if where else problem)
        self.where = where
        self.problem = problem


_MISSING = object()


def kind(value: object) -> str:
    """How a decoded JSON value is named in a message (its type, never its possibly huge text)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def object_at(data: object, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise HaltShapeError(where, f"should be an object, not {kind(data)}")
    return data


def text(entry: dict[str, Any], key: str, where: str = "") -> str:
    value = entry.get(key, _MISSING)
    if value is _MISSING:
        raise HaltShapeError(_at(where, key), "is missing (a string is required)")
    if not isinstance(value, str):
        raise HaltShapeError(_at(where, key), f"should be a string, not {kind(value)}")
    return value


def optional_text(entry: dict[str, Any], key: str, where: str = "") -> str | None:
    value = entry.get(key)
    if value is None or isinstance(value, str):
        return value
    raise HaltShapeError(_at(where, key), f"should be a string or null, not {kind(value)}")


def optional_object(entry: dict[str, Any], key: str, where: str = "") -> dict[str, Any] | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise HaltShapeError(_at(where, key), f"should be an object or null, not {kind(value)}")
    return dict(value)  # a copy: the state must not change when the decoded document does


def required_object(entry: dict[str, Any], key: str, where: str = "") -> dict[str, Any]:
    value = entry.get(key, _MISSING)
    if value is _MISSING:
        raise HaltShapeError(_at(where, key), "is missing (an object is required)")
    if not isinstance(value, dict):
        raise HaltShapeError(_at(where, key), f"should be an object, not {kind(value)}")
    return dict(value)


def member(entry: dict[str, Any], key: str, vocabulary: type[_Member], where: str = "") -> _Member:
    value = entry.get(key, _MISSING)
    allowed = ", ".join(repr(m.value) for m in vocabulary)
    if value is _MISSING:
        raise HaltShapeError(_at(where, key), f"is missing (one of {allowed} is required)")
    if isinstance(value, str):
        try:
            return vocabulary(value)
        except ValueError:
            shown = value if len(value) <= 40 else f"{value[:40]}…"
            raise HaltShapeError(
                _at(where, key), f"should be one of {allowed}, not {shown!r}"
            ) from None
    raise HaltShapeError(_at(where, key), f"should be one of {allowed}, not {kind(value)}")


def extra(entry: dict[str, Any], known: frozenset[str]) -> tuple[tuple[str, Any], ...]:
    return tuple((key, value) for key, value in entry.items() if key not in known)
