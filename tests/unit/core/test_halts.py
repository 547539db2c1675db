"""transition(): every rule of the halt state machine, then random sequences of moves."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from assay.core.halts import (
    CANONICAL_HALTS,
    SEVERITY_RANK,
    HaltRearm,
    HaltState,
    Rejection,
    Transitioned,
    evidence_of,
    lowered_floor,
    transition,
)
from assay.core.vocab import CanonicalHalt, CheckHalt, HaltLifecycle, HaltSeverity

ARMED_AT = "2026-01-01T00:00:00.000000Z"
T1 = "2026-01-01T00:01:00.000000Z"
T2 = "2026-01-01T00:02:00.000000Z"
T3 = "2026-01-01T00:03:00.000000Z"

L = HaltLifecycle


def make(
    lifecycle: HaltLifecycle = L.ARMED,
    severity: HaltSeverity = HaltSeverity.BLOCK,
    name: str = "halt-scope-breach",
    **extra: Any,
) -> HaltState:
    return HaltState(name=name, severity=severity, lifecycle=lifecycle, armed_at=ARMED_AT, **extra)


def fired(severity: HaltSeverity = HaltSeverity.BLOCK, detail: str = "first") -> HaltState:
    result = transition(make(L.CHECKED, severity), L.FIRED, at=T1, evidence=detail)
    assert isinstance(result, Transitioned)
    return result.state


def moved(result: Transitioned | Rejection) -> Transitioned:
    assert isinstance(result, Transitioned), result
    return result


def rejected(result: Transitioned | Rejection, halt_class: CheckHalt) -> Rejection:
    assert isinstance(result, Rejection), result
    assert result.halt_class is halt_class
    assert result.detail
    return result


# --- constants -------------------------------------------------------------------------------


def test_canonical_halts_and_severities() -> None:
    assert {k.value: v.value for k, v in CANONICAL_HALTS.items()} == {
        "halt-anchor-resolution-failure": "block",
        "halt-scope-breach": "block",
        "halt-secret-exposure": "block",
        "halt-spec-contradiction": "block",
        "halt-irreversible-action": "block",
        "halt-budget-exhausted": "warn",
        "halt-verification-gap": "warn",
    }
    assert set(CANONICAL_HALTS) == set(CanonicalHalt)


def test_severity_rank_orders_block_above_warn_above_log() -> None:
    assert (
        SEVERITY_RANK[HaltSeverity.BLOCK]
        < SEVERITY_RANK[HaltSeverity.WARN]
        < SEVERITY_RANK[HaltSeverity.LOG]
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, None),
        ("", None),
        ("   \n\t", None),
        ("why", {"detail": "why"}),
        (" x ", {"detail": " x "}),
    ],
)
def test_evidence_of(text: str | None, expected: dict[str, str] | None) -> None:
    assert evidence_of(text) == expected


# --- query -----------------------------------------------------------------------------------


def test_query_armed_becomes_checked_and_is_applied() -> None:
    before = make(L.ARMED)
    result = moved(transition(before, L.CHECKED, at=T1))
    assert result.applied is True
    assert result.previous is L.ARMED
    assert result.state.lifecycle is L.CHECKED
    assert result.state.armed_at == ARMED_AT
    assert result.state.evidence is None
    assert result.state.fired_at is None
    assert before.lifecycle is L.ARMED  # the input is not mutated


def test_query_checked_is_idempotent_and_not_applied() -> None:
    before = make(L.CHECKED)
    result = moved(transition(before, L.CHECKED, at=T1))
    assert result.applied is False
    assert result.previous is L.CHECKED
    assert result.state == before


@pytest.mark.parametrize("severity", list(HaltSeverity))
def test_query_fired_is_a_noop_read(severity: HaltSeverity) -> None:
    before = fired(severity)
    result = moved(transition(before, L.CHECKED, at=T2))
    assert result.applied is False
    assert result.previous is L.FIRED
    assert result.state == before
    assert result.state.evidence == {"detail": "first"}
    assert result.state.fired_at == T1


def test_query_accepts_the_lifecycle_as_a_plain_string() -> None:
    result = moved(transition(make(L.ARMED), "CHECKED", at=T1))
    assert result.state.lifecycle is L.CHECKED


def test_query_declared_is_rejected() -> None:
    rejected(transition(make(L.DECLARED), L.CHECKED, at=T1), CheckHalt.TRANSITION_REJECTED)


# --- fire ------------------------------------------------------------------------------------


@pytest.mark.parametrize("start", [L.ARMED, L.CHECKED])
@pytest.mark.parametrize("severity", list(HaltSeverity))
def test_fire_from_armed_or_checked_with_evidence(
    start: HaltLifecycle, severity: HaltSeverity
) -> None:
    result = moved(transition(make(start, severity), L.FIRED, at=T1, evidence="stale anchor"))
    assert result.applied is True
    assert result.previous is start
    state = result.state
    assert state.lifecycle is L.FIRED
    assert state.evidence == {"detail": "stale anchor"}
    assert state.fired_at == T1
    assert state.armed_at == ARMED_AT
    assert state.severity is severity


@pytest.mark.parametrize("evidence", [None, "", "   ", "\n\t"])
@pytest.mark.parametrize("start", [L.ARMED, L.CHECKED])
def test_fire_without_or_with_blank_evidence(start: HaltLifecycle, evidence: str | None) -> None:
    rejected(
        transition(make(start), L.FIRED, at=T1, evidence=evidence),
        CheckHalt.FIRE_EVIDENCE_MISSING,
    )


def test_refire_of_a_fired_block_halt_is_sticky() -> None:
    before = fired(HaltSeverity.BLOCK)
    result = rejected(
        transition(before, L.FIRED, at=T2, evidence="second"), CheckHalt.STICKY_REJECTION
    )
    assert "sticky" in result.detail
    assert before.evidence == {"detail": "first"}


@pytest.mark.parametrize("severity", [HaltSeverity.WARN, HaltSeverity.LOG])
def test_refire_of_a_fired_warn_or_log_halt_needs_a_rearm(severity: HaltSeverity) -> None:
    rejected(
        transition(fired(severity), L.FIRED, at=T2, evidence="second"),
        CheckHalt.TRANSITION_REJECTED,
    )


def test_fire_declared_is_rejected() -> None:
    rejected(
        transition(make(L.DECLARED), L.FIRED, at=T1, evidence="x"), CheckHalt.TRANSITION_REJECTED
    )


# --- backward and unknown --------------------------------------------------------------------


@pytest.mark.parametrize("start", [L.ARMED, L.CHECKED, L.FIRED, L.ATTESTED])
def test_backward_to_declared_is_rejected(start: HaltLifecycle) -> None:
    state = fired() if start is L.FIRED else make(start)
    rejected(transition(state, L.DECLARED, at=T2, evidence="x"), CheckHalt.TRANSITION_REJECTED)


@pytest.mark.parametrize("target", ["BOGUS", "fired", "", "armed ", "DONE"])
def test_unknown_lifecycle_is_rejected(target: str) -> None:
    result = rejected(
        transition(make(L.ARMED), target, at=T1, evidence="x"), CheckHalt.TRANSITION_REJECTED
    )
    assert repr(target) in result.detail


# --- rearm -----------------------------------------------------------------------------------


def test_rearm_from_fired_keeps_armed_at_and_appends_history() -> None:
    before = fired(HaltSeverity.BLOCK, detail="leaked key")
    result = moved(transition(before, L.ARMED, at=T2, evidence="key rotated"))
    assert result.applied is True
    assert result.previous is L.FIRED
    state = result.state
    assert state.lifecycle is L.ARMED
    assert state.armed_at == ARMED_AT
    assert state.evidence is None
    assert state.fired_at is None
    assert state.history == (
        HaltRearm(
            cleared=L.FIRED,
            cleared_evidence={"detail": "leaked key"},
            cleared_fired_at=T1,
            rearmed_at=T2,
            evidence={"detail": "key rotated"},
        ),
    )
    # And it can fire again, with the history kept.
    again = moved(transition(state, L.FIRED, at=T3, evidence="leaked again"))
    assert again.state.lifecycle is L.FIRED
    assert again.state.fired_at == T3
    assert len(again.state.history) == 1


def test_rearm_from_checked_keeps_armed_at_and_appends_history() -> None:
    result = moved(transition(make(L.CHECKED), L.ARMED, at=T2, evidence="reset"))
    assert result.previous is L.CHECKED
    assert result.state.lifecycle is L.ARMED
    assert result.state.armed_at == ARMED_AT
    assert [h.cleared for h in result.state.history] == [L.CHECKED]
    assert result.state.history[0].cleared_evidence is None
    assert result.state.history[0].cleared_fired_at is None


def test_second_rearm_appends_rather_than_replaces() -> None:
    first = moved(transition(fired(detail="one"), L.ARMED, at=T2, evidence="fix one")).state
    refired = moved(transition(first, L.FIRED, at=T3, evidence="two")).state
    second = moved(transition(refired, L.ARMED, at=T3, evidence="fix two")).state
    assert [h.evidence for h in second.history] == [{"detail": "fix one"}, {"detail": "fix two"}]
    assert [h.cleared_evidence for h in second.history] == [{"detail": "one"}, {"detail": "two"}]
    assert second.armed_at == ARMED_AT


def test_rearm_from_armed_is_rejected() -> None:
    rejected(transition(make(L.ARMED), L.ARMED, at=T1, evidence="x"), CheckHalt.TRANSITION_REJECTED)


@pytest.mark.parametrize("evidence", [None, "", "  "])
def test_rearm_without_evidence_is_rejected(evidence: str | None) -> None:
    result = transition(fired(), L.ARMED, at=T2, evidence=evidence)
    assert isinstance(result, Rejection)
    assert result.halt_class is CheckHalt.REARM_EVIDENCE_MISSING


# --- attest ----------------------------------------------------------------------------------


@pytest.mark.parametrize("start", [L.ARMED, L.CHECKED, L.FIRED])
def test_attest_from_every_armed_state(start: HaltLifecycle) -> None:
    before = fired() if start is L.FIRED else make(start)
    result = moved(transition(before, L.ATTESTED, at=T2))
    assert result.applied is True
    assert result.previous is start
    state = result.state
    assert state.lifecycle is L.ATTESTED
    assert state.attested_at == T2
    assert state.armed_at == ARMED_AT
    # Closure still sees what fired.
    assert state.evidence == before.evidence
    assert state.fired_at == before.fired_at


def test_attest_of_attested_is_a_noop() -> None:
    attested = moved(transition(fired(), L.ATTESTED, at=T2)).state
    again = moved(transition(attested, L.ATTESTED, at=T3))
    assert again.applied is False
    assert again.state == attested
    assert again.state.attested_at == T2


def test_attest_declared_is_rejected() -> None:
    rejected(transition(make(L.DECLARED), L.ATTESTED, at=T1), CheckHalt.TRANSITION_REJECTED)


@pytest.mark.parametrize(
    ("target", "evidence"),
    [(L.FIRED, "x"), (L.FIRED, None), (L.ARMED, "x"), (L.DECLARED, "x"), (L.CHECKED, None)],
)
def test_nothing_moves_after_attested(target: HaltLifecycle, evidence: str | None) -> None:
    attested = moved(transition(make(L.CHECKED), L.ATTESTED, at=T2)).state
    result = transition(attested, target, at=T3, evidence=evidence)
    if isinstance(result, Transitioned):
        # Only a query is allowed, and it is a read.
        assert target is L.CHECKED
        assert result.applied is False
        assert result.state == attested
    else:
        assert result.halt_class is CheckHalt.TRANSITION_REJECTED


# --- serialisation ---------------------------------------------------------------------------


def test_to_json_has_the_1_0_0_keys_until_attest_or_rearm() -> None:
    keys = {"name", "severity", "lifecycle", "evidence", "armed_at", "fired_at"}
    assert set(make().to_json()) == keys
    assert set(fired().to_json()) == keys
    assert not fired().uses_v1_1()
    attested = moved(transition(fired(), L.ATTESTED, at=T2)).state
    assert set(attested.to_json()) == keys | {"attested_at"}
    rearmed = moved(transition(fired(), L.ARMED, at=T2, evidence="ok")).state
    assert set(rearmed.to_json()) == keys | {"history"}
    assert attested.uses_v1_1()
    assert rearmed.uses_v1_1()
    for state in (make(), fired(), attested, rearmed):
        assert HaltState.from_json(state.to_json()) == state


def test_to_json_values_are_plain_json() -> None:
    assert fired(HaltSeverity.WARN).to_json() == {
        "name": "halt-scope-breach",
        "severity": "warn",
        "lifecycle": "FIRED",
        "evidence": {"detail": "first"},
        "armed_at": ARMED_AT,
        "fired_at": T1,
    }


# --- random sequences ------------------------------------------------------------------------

SEVERITIES = [HaltSeverity.BLOCK, HaltSeverity.BLOCK, HaltSeverity.WARN, HaltSeverity.LOG]
EVIDENCE = st.one_of(st.none(), st.sampled_from(["", "  ", "\t"]), st.text(min_size=1, max_size=8))
HALT_INDEX = st.integers(min_value=0, max_value=len(SEVERITIES) - 1)


class HaltMachine(RuleBasedStateMachine):
    """Random query / fire / rearm / attest across halts of different severities.

    A tiny reference model (``had_fired``, ``frozen``) is kept next to the real states so the
    invariants can be checked after every step.
    """

    def __init__(self) -> None:
        super().__init__()
        self.clock = 0
        self.halts = [
            HaltState(
                name=f"halt-{i}-{sev.value}",
                severity=sev,
                lifecycle=L.ARMED,
                armed_at=ARMED_AT,
            )
            for i, sev in enumerate(SEVERITIES)
        ]
        self.had_fired = [False] * len(self.halts)
        self.attested: list[HaltState | None] = [None] * len(self.halts)

    def _now(self) -> str:
        self.clock += 1
        return f"2026-01-02T00:00:{self.clock % 60:02d}.{self.clock:06d}Z"

    def _apply(
        self, index: int, target: HaltLifecycle | str, evidence: str | None = None
    ) -> Transitioned | Rejection:
        before = self.halts[index]
        result = transition(before, target, at=self._now(), evidence=evidence)
        if isinstance(result, Transitioned):
            if not result.applied:
                assert result.state == before
            assert result.previous is before.lifecycle
            self.halts[index] = result.state
        else:
            assert isinstance(result.halt_class, CheckHalt)
        return result

    @rule(index=HALT_INDEX)
    def query(self, index: int) -> None:
        before = self.halts[index]
        result = self._apply(index, L.CHECKED)
        assert isinstance(result, Transitioned)
        assert result.applied is (before.lifecycle is L.ARMED)

    @rule(index=HALT_INDEX, evidence=EVIDENCE)
    def fire(self, index: int, evidence: str | None) -> None:
        before = self.halts[index]
        result = self._apply(index, L.FIRED, evidence)
        has_proof = evidence is not None and evidence.strip() != ""
        if before.lifecycle is L.ATTESTED:
            assert isinstance(result, Rejection)
            assert result.halt_class is CheckHalt.TRANSITION_REJECTED
        elif not has_proof:
            assert isinstance(result, Rejection)
            assert result.halt_class is CheckHalt.FIRE_EVIDENCE_MISSING
        elif before.lifecycle is L.FIRED:
            assert isinstance(result, Rejection)
            expected = (
                CheckHalt.STICKY_REJECTION
                if before.severity is HaltSeverity.BLOCK
                else CheckHalt.TRANSITION_REJECTED
            )
            assert result.halt_class is expected
        else:
            assert isinstance(result, Transitioned)
            assert result.applied
            assert result.state.lifecycle is L.FIRED
            assert result.state.evidence == {"detail": evidence}
            self.had_fired[index] = True

    @rule(index=HALT_INDEX, evidence=EVIDENCE)
    def rearm(self, index: int, evidence: str | None) -> None:
        before = self.halts[index]
        result = self._apply(index, L.ARMED, evidence)
        has_proof = evidence is not None and evidence.strip() != ""
        if isinstance(result, Transitioned):
            assert has_proof
            assert before.lifecycle in (L.CHECKED, L.FIRED)
            assert result.state.lifecycle is L.ARMED
            assert len(result.state.history) == len(before.history) + 1
            assert result.state.history[-1].cleared is before.lifecycle
            assert result.state.history[-1].cleared_evidence == before.evidence
            self.had_fired[index] = False
        else:
            assert not has_proof or before.lifecycle not in (L.CHECKED, L.FIRED)

    @rule(index=HALT_INDEX)
    def attest_one(self, index: int) -> None:
        result = self._apply(index, L.ATTESTED)
        assert isinstance(result, Transitioned)
        self.attested[index] = self.attested[index] or result.state

    @precondition(lambda self: any(a is None for a in self.attested))
    @rule()
    def attest_all(self) -> None:
        for index in range(len(self.halts)):
            self.attest_one(index)

    @rule(index=HALT_INDEX, goal=st.sampled_from(["DECLARED", "NOPE", "checked"]))
    def bogus_move(self, index: int, goal: str) -> None:
        result = self._apply(index, goal, "some evidence")
        assert isinstance(result, Rejection)
        assert result.halt_class is CheckHalt.TRANSITION_REJECTED

    # Invariants, checked after every step.

    @invariant()
    def states_round_trip(self) -> None:
        for state in self.halts:
            assert HaltState.from_json(state.to_json()) == state
            assert state.lifecycle in (L.ARMED, L.CHECKED, L.FIRED, L.ATTESTED)

    @invariant()
    def armed_at_never_changes(self) -> None:
        assert all(state.armed_at == ARMED_AT for state in self.halts)

    @invariant()
    def fired_at_iff_fired(self) -> None:
        for state, had_fired in zip(self.halts, self.had_fired, strict=True):
            expected = state.lifecycle is L.FIRED or (state.lifecycle is L.ATTESTED and had_fired)
            assert (state.fired_at is not None) is expected, state
            assert (state.evidence is not None) is expected, state

    @invariant()
    def nothing_moves_after_attested(self) -> None:
        for state, snapshot in zip(self.halts, self.attested, strict=True):
            if snapshot is not None:
                assert state == snapshot
                assert state.attested_at is not None

    @invariant()
    def attested_at_only_when_attested(self) -> None:
        for state in self.halts:
            assert (state.attested_at is not None) is (state.lifecycle is L.ATTESTED)


class StickyMachine(HaltMachine):
    """The same moves, but checks the sticky rule across each step explicitly."""

    def _apply(
        self, index: int, target: HaltLifecycle | str, evidence: str | None = None
    ) -> Transitioned | Rejection:
        before = list(self.halts)
        result = super()._apply(index, target, evidence)
        for i, (old, new) in enumerate(zip(before, self.halts, strict=True)):
            if old.lifecycle is L.FIRED and old.severity is HaltSeverity.BLOCK:
                touched_by_release = i == index and target in (L.ARMED, L.ATTESTED)
                if not touched_by_release:
                    assert new.lifecycle is L.FIRED
                    assert new.evidence == old.evidence
                    assert new.fired_at == old.fired_at
        return result


_SETTINGS = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
TestHaltMachine = HaltMachine.TestCase
TestHaltMachine.settings = _SETTINGS
TestStickyMachine = StickyMachine.TestCase
TestStickyMachine.settings = _SETTINGS


def test_lowered_floor_names_the_canonical_floor_only_when_lowered() -> None:
    assert lowered_floor("halt-budget-exhausted", HaltSeverity.LOG) is HaltSeverity.WARN
    assert lowered_floor("halt-scope-breach", HaltSeverity.WARN) is HaltSeverity.BLOCK
    assert lowered_floor("halt-budget-exhausted", HaltSeverity.WARN) is None
    assert lowered_floor("halt-budget-exhausted", HaltSeverity.BLOCK) is None
    assert lowered_floor("halt-own", HaltSeverity.LOG) is None
