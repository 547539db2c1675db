"""Turning a contract's ``halt_classes`` into armed halt states (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from assay.core.halts import CANONICAL_HALTS, HaltState, Violation, lowered_floor
from assay.core.vocab import ArmHalt, HaltLifecycle, HaltSeverity


@dataclass(frozen=True, slots=True)
class ArmedHalts:
    halts: tuple[HaltState, ...]
    canonical_halt_count: int
    per_dispatch_addition_count: int


def arm_halts(contract: object, *, at: str) -> ArmedHalts | list[Violation]:
    """Arm every halt a parsed contract declares, or say every reason it cannot be armed."""
    if not isinstance(contract, Mapping):
        kind = type(contract).__name__
        return [
            _violation(
                ArmHalt.CONTRACT_YAML_MALFORMED, f"contract top level is {kind}, not a mapping"
            )
        ]
    declared = contract.get("halt_classes")
    if not isinstance(declared, list):
        return [
            _violation(
                ArmHalt.HALT_CLASSES_MISSING,
                "contract has no `halt_classes:` field (or non-list value)",
            )
        ]

    halts: list[HaltState] = []
    problems: list[Violation] = []
    seen: set[str] = set()
    for index, entry in enumerate(declared):
        built = _build(index, entry, at)
        if isinstance(built, Violation):
            problems.append(built)
            continue
        if built.name in seen:
            problems.append(
                _violation(
                    ArmHalt.STATE_CONSTRUCTION_FAILURE,
                    f"halt_classes[{index}]: {built.name} is named twice",
                )
            )
            continue
        seen.add(built.name)
        halts.append(built)
    if problems:
        return problems

    by_name = {h.name: h for h in halts}
    for name, floor in CANONICAL_HALTS.items():
        armed = by_name.get(name.value)
        if armed is None:
            problems.append(
                _violation(
                    ArmHalt.CANONICAL_HALT_INCOMPLETE,
                    f"canonical halt {name.value} is missing (all seven are required)",
                )
            )
        elif lowered_floor(armed.name, armed.severity) is not None:
            problems.append(
                _violation(
                    ArmHalt.CANONICAL_HALT_INCOMPLETE,
                    f"canonical halt {name.value} is listed as {armed.severity.value}; "
                    f"its severity may be raised from {floor.value}, never lowered",
                )
            )
    if problems:
        return problems

    canonical = sum(1 for h in halts if h.name in CANONICAL_HALTS)
    return ArmedHalts(
        halts=tuple(halts),
        canonical_halt_count=canonical,
        per_dispatch_addition_count=len(halts) - canonical,
    )


def _build(index: int, entry: object, at: str) -> HaltState | Violation:
    if not isinstance(entry, Mapping):
        return _violation(
            ArmHalt.STATE_CONSTRUCTION_FAILURE,
            f"halt_classes[{index}] is {type(entry).__name__}, not a {{name, severity}} mapping",
        )
    unknown = sorted(str(k) for k in entry if k not in ("name", "severity"))
    if unknown:
        return _violation(
            ArmHalt.STATE_CONSTRUCTION_FAILURE,
            f"halt_classes[{index}] has unknown key(s): {', '.join(unknown)}",
        )
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        return _violation(
            ArmHalt.STATE_CONSTRUCTION_FAILURE, f"halt_classes[{index}] has no usable `name`"
        )
    severity = entry.get("severity")
    try:
        if not isinstance(severity, str):
            raise ValueError(severity)
        level = HaltSeverity(severity)
    except ValueError:
        allowed = ", ".join(s.value for s in HaltSeverity)
        return _violation(
            ArmHalt.STATE_CONSTRUCTION_FAILURE,
            f"halt_classes[{index}] ({name}): severity {severity!r} is not one of {allowed}",
        )
    return HaltState(name=name, severity=level, lifecycle=HaltLifecycle.ARMED, armed_at=at)


def _violation(halt_class: ArmHalt, detail: str) -> Violation:
    return Violation(halt_class=halt_class.value, detail=detail)
