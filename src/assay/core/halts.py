"""Halt classes, the state of one armed halt, and the rules by which it moves.

The lifecycle is DECLARED → ARMED → CHECKED → FIRED → ATTESTED. Every move goes through
:func:`transition`, a pure function: it returns the new state or a :class:`Rejection` naming
the tool-local halt class that explains why the move is not allowed.
"""

from __future__ import annotations

from assay.core.frozen import Frozen, replace
from assay.core.halt_shape import (
    HaltShapeError,
    extra,
    kind,
    member,
    object_at,
    optional_object,
    optional_text,
    required_object,
    text,
)
from assay.core.vocab import CanonicalHalt, CheckHalt, HaltLifecycle, HaltSeverity

TYPE_CHECKING = False  # typing is an import `assay halt check` does without (assay.core.frozen)
if TYPE_CHECKING:
    from typing import Any

CANONICAL_HALTS: dict[CanonicalHalt, HaltSeverity] = {
    CanonicalHalt.ANCHOR_RESOLUTION_FAILURE: HaltSeverity.BLOCK,
    CanonicalHalt.SCOPE_BREACH: HaltSeverity.BLOCK,
    CanonicalHalt.SECRET_EXPOSURE: HaltSeverity.BLOCK,
    CanonicalHalt.SPEC_CONTRADICTION: HaltSeverity.BLOCK,
    CanonicalHalt.IRREVERSIBLE_ACTION: HaltSeverity.BLOCK,
    CanonicalHalt.BUDGET_EXHAUSTED: HaltSeverity.WARN,
    CanonicalHalt.VERIFICATION_GAP: HaltSeverity.WARN,
}

# Lower rank = more severe; a canonical halt may be raised (lower rank), never lowered.
SEVERITY_RANK: dict[HaltSeverity, int] = {
    HaltSeverity.BLOCK: 0,
    HaltSeverity.WARN: 1,
    HaltSeverity.LOG: 2,
}


def with_canonical_halts(
    declared: list[tuple[str, HaltSeverity]],
) -> list[tuple[str, HaltSeverity]]:
    """The halts a contract arms, as ``(name, severity)``: each canonical halt ``declared``
    leaves out, at its canonical severity and in canonical order, then ``declared`` as
    written. A contract adds its own halts without restating the seven; one that lists all
    seven arms exactly its list, as it always did."""
    named = {name for name, _ in declared}
    missing = [(h.value, s) for h, s in CANONICAL_HALTS.items() if h.value not in named]
    return missing + list(declared)


def lowered_floor(name: str, severity: HaltSeverity) -> HaltSeverity | None:
    """The canonical severity ``severity`` would lower halt ``name`` below, if it would.

    None for a per-dispatch addition (no floor) and for a canonical halt kept or raised.
    """
    floor = next((s for n, s in CANONICAL_HALTS.items() if n == name), None)
    if floor is None or SEVERITY_RANK[severity] <= SEVERITY_RANK[floor]:
        return None
    return floor


class HaltRearm(Frozen):
    """One re-arm of a halt: what it cleared and the evidence of the remedy."""

    __slots__ = (
        "cleared",
        "cleared_evidence",
        "cleared_fired_at",
        "evidence",
        "extra",
        "rearmed_at",
    )
    cleared: HaltLifecycle
    cleared_evidence: dict[str, Any] | None
    cleared_fired_at: str | None
    rearmed_at: str
    evidence: dict[str, Any]
    # Keys a newer 1.x writer added to the entry, kept in order and written back unchanged.
    extra: tuple[tuple[str, Any], ...]

    def __init__(
        self,
        *,
        cleared: HaltLifecycle,
        cleared_evidence: dict[str, Any] | None = None,
        cleared_fired_at: str | None = None,
        rearmed_at: str,
        evidence: dict[str, Any],
        extra: tuple[tuple[str, Any], ...] = (),
    ) -> None:
        super().__init__(
            cleared=cleared,
            cleared_evidence=cleared_evidence,
            cleared_fired_at=cleared_fired_at,
            rearmed_at=rearmed_at,
            evidence=evidence,
            extra=extra,
        )

    @classmethod
    def from_json(cls, data: object, where: str = "") -> HaltRearm:
        """Validate one decoded ``history`` entry; raises :class:`HaltShapeError`."""
        entry = object_at(data, where)
        return cls(
            cleared=member(entry, "cleared", HaltLifecycle, where),
            cleared_evidence=optional_object(entry, "cleared_evidence", where),
            cleared_fired_at=optional_text(entry, "cleared_fired_at", where),
            rearmed_at=text(entry, "rearmed_at", where),
            evidence=required_object(entry, "evidence", where),
            extra=extra(entry, _REARM_KEYS),
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "cleared": self.cleared.value,
            "cleared_evidence": self.cleared_evidence,
            "cleared_fired_at": self.cleared_fired_at,
            "rearmed_at": self.rearmed_at,
            "evidence": self.evidence,
        }
        for key, value in self.extra:
            data.setdefault(key, value)
        return data


class HaltState(Frozen):
    """One halt of one dispatch. The first six fields are the 1.0.0 shape of seed 002.

    A frozen record with a hand-written validator (:meth:`from_json`) rather than a pydantic
    model: ``assay halt check`` runs inside a coder's turn, and importing pydantic alone would
    cost it several times the start-up of the interpreter.
    """

    __slots__ = (
        "armed_at",
        "attested_at",
        "evidence",
        "extra",
        "fired_at",
        "history",
        "lifecycle",
        "name",
        "severity",
    )
    name: str
    severity: HaltSeverity
    lifecycle: HaltLifecycle
    evidence: dict[str, Any] | None
    armed_at: str
    fired_at: str | None
    # 1.1.0 additions, written only by attest and rearm.
    attested_at: str | None
    history: tuple[HaltRearm, ...]
    # Keys a newer 1.x writer added, kept in order and written back unchanged.
    extra: tuple[tuple[str, Any], ...]

    def __init__(
        self,
        *,
        name: str,
        severity: HaltSeverity,
        lifecycle: HaltLifecycle,
        evidence: dict[str, Any] | None = None,
        armed_at: str,
        fired_at: str | None = None,
        attested_at: str | None = None,
        history: tuple[HaltRearm, ...] = (),
        extra: tuple[tuple[str, Any], ...] = (),
    ) -> None:
        super().__init__(
            name=name,
            severity=severity,
            lifecycle=lifecycle,
            evidence=evidence,
            armed_at=armed_at,
            fired_at=fired_at,
            attested_at=attested_at,
            history=history,
            extra=extra,
        )

    @classmethod
    def from_json(cls, data: object) -> HaltState:
        """Validate one decoded state-file halt entry; raises :class:`HaltShapeError`.

        Fields are checked in declaration order and the first problem is reported, so the
        message names one field; unknown keys are kept in :attr:`extra`.
        """
        entry = object_at(data, "")
        return cls(
            name=text(entry, "name"),
            severity=member(entry, "severity", HaltSeverity),
            lifecycle=member(entry, "lifecycle", HaltLifecycle),
            evidence=optional_object(entry, "evidence"),
            armed_at=text(entry, "armed_at"),
            fired_at=optional_text(entry, "fired_at"),
            attested_at=optional_text(entry, "attested_at"),
            history=_history(entry),
            extra=extra(entry, _STATE_KEYS),
        )

    @property
    def has_fired(self) -> bool:
        return self.fired_at is not None

    def uses_v1_1(self) -> bool:
        return self.attested_at is not None or bool(self.history)

    def to_json(self) -> dict[str, Any]:
        """The state-file form: the six 1.0.0 keys, plus 1.1.0 keys only when set."""
        data: dict[str, Any] = {
            "name": self.name,
            "severity": self.severity.value,
            "lifecycle": self.lifecycle.value,
            "evidence": self.evidence,
            "armed_at": self.armed_at,
            "fired_at": self.fired_at,
        }
        if self.attested_at is not None:
            data["attested_at"] = self.attested_at
        if self.history:
            data["history"] = [h.to_json() for h in self.history]
        for key, value in self.extra:
            data.setdefault(key, value)
        return data


_STATE_KEYS = frozenset(
    ("name", "severity", "lifecycle", "evidence", "armed_at", "fired_at", "attested_at", "history")
)
_REARM_KEYS = frozenset(
    ("cleared", "cleared_evidence", "cleared_fired_at", "rearmed_at", "evidence")
)


def _history(entry: dict[str, Any]) -> tuple[HaltRearm, ...]:
    value = entry.get("history", ())
    if not isinstance(value, list | tuple):
        raise HaltShapeError("history", f"should be a list, not {kind(value)}")
    return tuple(HaltRearm.from_json(item, f"history[{i}]") for i, item in enumerate(value))


class Transitioned(Frozen):
    """A move that was allowed; ``applied`` is False for a no-op read."""

    __slots__ = ("applied", "previous", "state")
    state: HaltState
    previous: HaltLifecycle
    applied: bool

    def __init__(self, state: HaltState, previous: HaltLifecycle, applied: bool) -> None:
        super().__init__(state=state, previous=previous, applied=applied)


class Rejection(Frozen):
    """A move that was refused, named by its tool-local halt class."""

    __slots__ = ("detail", "halt_class")
    halt_class: CheckHalt
    detail: str

    def __init__(self, halt_class: CheckHalt, detail: str) -> None:
        super().__init__(halt_class=halt_class, detail=detail)


class Violation(Frozen):
    """One entry of a ``violations`` list in the halt commands' JSON."""

    __slots__ = ("detail", "halt_class", "severity")
    halt_class: str
    detail: str
    severity: HaltSeverity

    def __init__(
        self, halt_class: str, detail: str, severity: HaltSeverity = HaltSeverity.BLOCK
    ) -> None:
        super().__init__(halt_class=halt_class, detail=detail, severity=severity)

    def to_json(self) -> dict[str, Any]:
        return {
            "halt_class": self.halt_class,
            "severity": self.severity.value,
            "detail": self.detail,
        }


def evidence_of(text: str | None) -> dict[str, Any] | None:
    """Evidence as stored: ``{"detail": text}``; blank text is no evidence."""
    if text is None or not text.strip():
        return None
    return {"detail": text}


def transition(
    state: HaltState,
    target: HaltLifecycle | str,
    *,
    at: str,
    evidence: str | None = None,
) -> Transitioned | Rejection:
    """Move ``state`` towards ``target`` at time ``at`` (an ISO-8601 UTC string).

    - CHECKED (a query): ARMED → CHECKED; on CHECKED, FIRED or ATTESTED it is a no-op read.
    - FIRED: from ARMED or CHECKED, with evidence. A FIRED block halt is sticky.
    - ARMED (a re-arm, with evidence of the remedy): from CHECKED or FIRED; keeps ``armed_at``
      and appends what it clears to ``history``.
    - ATTESTED (closure): from any armed state; after it nothing moves.
    """
    current = state.lifecycle
    try:
        goal = HaltLifecycle(target)
    except ValueError:
        return _reject(CheckHalt.TRANSITION_REJECTED, f"unknown lifecycle {target!r}")

    if goal is HaltLifecycle.CHECKED:
        if current is HaltLifecycle.ARMED:
            return _moved(state, replace(state, lifecycle=goal))
        if current in (HaltLifecycle.CHECKED, HaltLifecycle.FIRED, HaltLifecycle.ATTESTED):
            return Transitioned(state=state, previous=current, applied=False)
        return _reject(
            CheckHalt.TRANSITION_REJECTED,
            f"halt {state.name} is {current.value}, not armed; it cannot be checked",
        )

    if current is HaltLifecycle.ATTESTED:
        if goal is HaltLifecycle.ATTESTED:
            return Transitioned(state=state, previous=current, applied=False)
        return _reject(
            CheckHalt.TRANSITION_REJECTED,
            f"transition rejected: halt {state.name} is ATTESTED; nothing moves after closure",
        )

    if goal is HaltLifecycle.FIRED:
        proof = evidence_of(evidence)
        if proof is None:
            return _reject(
                CheckHalt.FIRE_EVIDENCE_MISSING,
                f"--fire on {state.name} needs --evidence: a FIRED halt must say why",
            )
        if current is HaltLifecycle.FIRED:
            if state.severity is HaltSeverity.BLOCK:
                return _reject(
                    CheckHalt.STICKY_REJECTION,
                    f"transition rejected: Block-severity halt {state.name} is FIRED and "
                    "sticky; an operator must re-arm it with evidence (assay halt rearm)",
                )
            return _reject(
                CheckHalt.TRANSITION_REJECTED,
                f"transition rejected: {state.severity.value}-severity halt {state.name} is "
                "already FIRED; re-arm it before firing again",
            )
        if current in (HaltLifecycle.ARMED, HaltLifecycle.CHECKED):
            fired = replace(state, lifecycle=goal, evidence=proof, fired_at=at)
            return _moved(state, fired)
        return _reject(
            CheckHalt.TRANSITION_REJECTED,
            f"transition rejected: halt {state.name} is {current.value}; only an armed halt fires",
        )

    if goal is HaltLifecycle.ARMED:
        proof = evidence_of(evidence)
        if proof is None:
            return _reject(
                CheckHalt.REARM_EVIDENCE_MISSING,
                f"rearm of {state.name} needs --evidence of the remedy",
            )
        if current not in (HaltLifecycle.CHECKED, HaltLifecycle.FIRED):
            return _reject(
                CheckHalt.TRANSITION_REJECTED,
                f"transition rejected: halt {state.name} is {current.value}; "
                "only a CHECKED or FIRED halt can be re-armed",
            )
        record = HaltRearm(
            cleared=current,
            cleared_evidence=state.evidence,
            cleared_fired_at=state.fired_at,
            rearmed_at=at,
            evidence=proof,
        )
        rearmed = replace(
            state, lifecycle=goal, evidence=None, fired_at=None, history=(*state.history, record)
        )
        return _moved(state, rearmed)

    if goal is HaltLifecycle.ATTESTED:
        if current is HaltLifecycle.DECLARED:
            return _reject(
                CheckHalt.TRANSITION_REJECTED,
                f"transition rejected: halt {state.name} was never armed",
            )
        # Evidence and fired_at survive attestation: closure must still see what fired.
        return _moved(state, replace(state, lifecycle=goal, attested_at=at))

    return _reject(
        CheckHalt.TRANSITION_REJECTED,
        f"transition rejected: {current.value} → {goal.value} is backward",
    )


def _moved(before: HaltState, after: HaltState) -> Transitioned:
    return Transitioned(state=after, previous=before.lifecycle, applied=True)


def _reject(halt_class: CheckHalt, detail: str) -> Rejection:
    return Rejection(halt_class=halt_class, detail=detail)
