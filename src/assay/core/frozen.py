"""Immutable records with value equality, for the modules ``assay halt check`` imports.

What ``@dataclass(frozen=True, slots=True)`` gives (equality, hash, repr, no assignment, a
``replace``), without importing :mod:`dataclasses`: that module imports :mod:`inspect` (and
with it ``ast``, ``dis``, ``tokenize``), which alone costs about as much as starting the
interpreter, on a command a coder calls every turn. A subclass lists its fields in
``__slots__``, annotates them, and writes a typed ``__init__`` that hands every field to
``Frozen.__init__``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself is another import this module's users avoid
if TYPE_CHECKING:
    from typing import Any, TypeVar

    _Record = TypeVar("_Record", bound="Frozen")


class Frozen:
    """Base of a frozen record: its fields are the subclass's ``__slots__``."""

    __slots__: tuple[str, ...] = ()

    def __init__(self, **fields: object) -> None:
        names = self.__slots__
        if set(fields) != set(names):  # a subclass's __init__ forgot or invented a field
            raise TypeError(f"{type(self).__name__} fields are {names}, got {tuple(fields)}")
        for name in names:
            object.__setattr__(self, name, fields[name])

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({shown})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: {type(self).__name__} is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: {type(self).__name__} is frozen")

    # copy, deepcopy and pickle restore the fields without going through __setattr__.
    def __getstate__(self) -> tuple[Any, ...]:
        return self._values()

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(self.__slots__, state, strict=True):
            object.__setattr__(self, name, value)


def replace(record: _Record, **changes: Any) -> _Record:
    """A copy of ``record`` with ``changes`` applied, built through its ``__init__``."""
    fields = {name: getattr(record, name) for name in record.__slots__}
    unknown = set(changes) - set(fields)
    if unknown:
        raise TypeError(f"{type(record).__name__} has no field(s) {sorted(unknown)}")
    fields.update(changes)
    return type(record)(**fields)
