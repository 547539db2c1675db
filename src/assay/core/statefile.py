"""The halt state file document (seed 002, schema 1.0.0; 1.1.0 after attest or rearm).

Pure: turns a decoded JSON document into a :class:`HaltStateFile` or a violation, and back.
"""

from __future__ import annotations

import re

from assay.core.frozen import Frozen, replace
from assay.core.halt_shape import HaltShapeError
from assay.core.halts import HaltState, Violation
from assay.core.vocab import CheckHalt

TYPE_CHECKING = False  # typing is an import `assay halt check` does without (assay.core.frozen)
if TYPE_CHECKING:
    from typing import Any

SCHEMA_V1_0 = "1.0.0"
SCHEMA_V1_1 = "1.1.0"
_SUPPORTED_MAJOR = re.compile(r"^1\.\d+\.\d+$")


class HaltStateFile(Frozen):
    """A whole state file; each halt in it is a validated :class:`HaltState`."""

    __slots__ = (
        "armed_at",
        "canonical_halt_count",
        "contract_path",
        "dispatch_id",
        "extra",
        "halts",
        "per_dispatch_addition_count",
        "read_version",
    )
    dispatch_id: str
    contract_path: str
    armed_at: str
    halts: tuple[HaltState, ...]
    canonical_halt_count: int
    per_dispatch_addition_count: int
    read_version: str
    extra: tuple[tuple[str, Any], ...]  # top-level keys a newer 1.x writer added

    def __init__(
        self,
        *,
        dispatch_id: str,
        contract_path: str,
        armed_at: str,
        halts: tuple[HaltState, ...],
        canonical_halt_count: int,
        per_dispatch_addition_count: int,
        read_version: str = SCHEMA_V1_0,
        extra: tuple[tuple[str, Any], ...] = (),
    ) -> None:
        super().__init__(
            dispatch_id=dispatch_id,
            contract_path=contract_path,
            armed_at=armed_at,
            halts=halts,
            canonical_halt_count=canonical_halt_count,
            per_dispatch_addition_count=per_dispatch_addition_count,
            read_version=read_version,
            extra=extra,
        )

    @property
    def schema_version(self) -> str:
        """1.0.0 until an attest or re-arm adds its optional keys; never below what was read,
        so a newer 1.x file keeps its version (and its keys) when we write it back."""
        needed = SCHEMA_V1_1 if any(h.uses_v1_1() for h in self.halts) else SCHEMA_V1_0
        return max(needed, self.read_version, key=_version_key)

    def find(self, name: str) -> HaltState | None:
        return next((h for h in self.halts if h.name == name), None)

    def with_halt(self, halt: HaltState) -> HaltStateFile:
        return replace(self, halts=tuple(halt if h.name == halt.name else h for h in self.halts))

    def with_halts(self, halts: tuple[HaltState, ...]) -> HaltStateFile:
        return replace(self, halts=halts)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "dispatch_id": self.dispatch_id,
            "contract_path": self.contract_path,
            "armed_at": self.armed_at,
            "halts": [h.to_json() for h in self.halts],
            "canonical_halt_count": self.canonical_halt_count,
            "per_dispatch_addition_count": self.per_dispatch_addition_count,
            **dict(self.extra),
        }


_REQUIRED_TEXT = ("dispatch_id", "contract_path", "armed_at")
_KNOWN_KEYS = frozenset(
    {"schema_version", "halts", "canonical_halt_count", "per_dispatch_addition_count"}
    | set(_REQUIRED_TEXT)
)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


_REQUIRED_COUNT = ("canonical_halt_count", "per_dispatch_addition_count")
MAX_DEPTH = 64  # far deeper than any state file we write; deeper is malformed, not a crash


def nesting_depth_exceeds(doc: object, limit: int = MAX_DEPTH) -> bool:
    """True when ``doc`` nests lists and objects more than ``limit`` deep (iteratively, so
    a hostile document cannot exhaust the stack here or when it is written back)."""
    stack: list[tuple[object, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > limit:
                return True
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
    return False


def parse_state_document(doc: object) -> HaltStateFile | Violation:
    """Validate a decoded state file; malformed shape and bad halts are told apart."""
    if not isinstance(doc, dict):
        return _malformed(f"top level is {type(doc).__name__}, not an object")
    if nesting_depth_exceeds(doc):
        return _malformed(f"the document is nested more than {MAX_DEPTH} levels deep")
    version = doc.get("schema_version")
    if not isinstance(version, str) or not _SUPPORTED_MAJOR.match(version):
        return _malformed(f"schema_version {version!r} is not a supported 1.x version")
    halts = doc.get("halts")
    if not isinstance(halts, list):
        return _malformed("`halts` field is missing or not a list")
    for key in _REQUIRED_TEXT:
        if not isinstance(doc.get(key), str):
            return _malformed(f"`{key}` is missing or not a string")
    for key in _REQUIRED_COUNT:
        value = doc.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            return _malformed(f"`{key}` is missing or not an integer")
    built: list[HaltState] = []
    seen: set[str] = set()
    for index, raw in enumerate(halts):
        try:
            halt = HaltState.from_json(raw)
        except HaltShapeError as exc:
            where = f"halts[{index}].{exc.where}" if exc.where else f"halts[{index}]"
            return Violation(
                halt_class=CheckHalt.STATE_CONSTRUCTION_FAILURE.value,
                detail=f"{where}: {exc.problem}",
            )
        if halt.name in seen:
            return Violation(
                halt_class=CheckHalt.STATE_CONSTRUCTION_FAILURE.value,
                detail=f"halts[{index}].name: {halt.name} is named twice",
            )
        seen.add(halt.name)
        built.append(halt)
    return HaltStateFile(
        dispatch_id=doc["dispatch_id"],
        contract_path=doc["contract_path"],
        armed_at=doc["armed_at"],
        halts=tuple(built),
        canonical_halt_count=doc["canonical_halt_count"],
        per_dispatch_addition_count=doc["per_dispatch_addition_count"],
        read_version=version,
        extra=tuple((k, v) for k, v in doc.items() if k not in _KNOWN_KEYS),
    )


def _malformed(detail: str) -> Violation:
    return Violation(halt_class=CheckHalt.STATE_FILE_MALFORMED.value, detail=detail)
