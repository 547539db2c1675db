"""HaltWatch: the engine's own record of a dispatch's halts; a file that goes backwards is a
block of its own, and a firing once seen is never lost."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from assay.core.halt_watch import TAMPERED, HaltWatch, firings
from assay.core.halts import HaltState, Transitioned, transition
from assay.core.payload import HaltNotice
from assay.core.statefile import HaltStateFile
from assay.core.vocab import HaltLifecycle, HaltSeverity

L = HaltLifecycle
AT = "2026-01-01T00:00:00.000000Z"
T1 = "2026-01-01T00:01:00.000000Z"
NAMES = ("halt-irreversible-action", "halt-budget-exhausted")


def halt(
    name: str, lifecycle: HaltLifecycle = L.ARMED, severity: HaltSeverity | None = None
) -> HaltState:
    default = HaltSeverity.BLOCK if name == NAMES[0] else HaltSeverity.WARN
    return HaltState(name=name, severity=severity or default, lifecycle=lifecycle, armed_at=AT)


def state(*halts: HaltState, dispatch_id: str = "d1") -> HaltStateFile:
    return HaltStateFile(
        dispatch_id=dispatch_id,
        contract_path="/c.json",
        armed_at=AT,
        halts=tuple(halts),
        canonical_halt_count=len(halts),
        per_dispatch_addition_count=0,
    )


def armed() -> HaltStateFile:
    return state(*(halt(n) for n in NAMES))


def fire(h: HaltState, evidence: str = "dropped prod table") -> HaltState:
    result = transition(h, L.FIRED, at=T1, evidence=evidence)
    assert isinstance(result, Transitioned)
    return result.state


def fired_file() -> HaltStateFile:
    return state(fire(halt(NAMES[0])), halt(NAMES[1]))


def watched() -> HaltWatch:
    watch = HaltWatch("d1")
    assert watch.observe(armed()) == []
    return watch


def names(watch: HaltWatch) -> list[str]:
    return [n.name for n in watch.fired()]


def test_a_firing_seen_is_new_once_and_kept() -> None:
    watch = watched()
    new = watch.observe(fired_file())
    assert [(n.name, n.detail, n.fired_at) for n in new] == [(NAMES[0], "dropped prod table", T1)]
    assert watch.observe(fired_file()) == []
    assert names(watch) == [NAMES[0]] and not watch.tampered


def test_a_fired_halt_written_back_to_armed_is_tampering_and_still_fired() -> None:
    watch = watched()
    watch.observe(fired_file())
    watch.observe(armed())
    assert names(watch) == [NAMES[0], TAMPERED]
    tamper = watch.fired()[-1]
    assert tamper.severity is HaltSeverity.BLOCK
    assert f"{NAMES[0]} was FIRED and is now ARMED" in tamper.detail


def test_a_journaled_firing_the_file_never_showed_is_tampering() -> None:
    watch = watched()
    journaled = HaltNotice(name=NAMES[0], severity=HaltSeverity.BLOCK, detail="x", fired_at=T1)
    new = watch.observe(armed(), journaled=[journaled])
    assert new == [journaled]
    assert names(watch) == [NAMES[0], TAMPERED]
    assert "fired, and the file no longer says so" in watch.fired()[-1].detail


def test_removed_renamed_reshaped_or_reseverified_is_tampering() -> None:
    cases = {
        "removed": (None, "it was removed"),
        "dispatch": (state(*armed().halts, dispatch_id="d2"), "dispatch id changed to 'd2'"),
        "set": (state(halt(NAMES[0])), f"removed {NAMES[1]}"),
        "severity": (
            state(halt(NAMES[0]), halt(NAMES[1], severity=HaltSeverity.LOG)),
            "severity changed from warn to log",
        ),
    }
    for read, why in cases.values():
        watch = watched()
        watch.observe(read, "it was removed" if read is None else None)
        assert watch.tampered and why in watch.fired()[-1].detail


def test_a_firing_a_rearm_cleared_still_counts() -> None:
    watch = watched()
    result = transition(fire(halt(NAMES[0])), L.ARMED, at=T1, evidence="rearmed by the coder")
    assert isinstance(result, Transitioned)
    watch.observe(state(result.state, halt(NAMES[1])))
    assert names(watch) == [NAMES[0]]  # its history keeps the firing


def test_an_untouched_file_and_forward_moves_are_not_tampering() -> None:
    watch = watched()
    checked = transition(halt(NAMES[1]), L.CHECKED, at=T1)
    assert isinstance(checked, Transitioned)
    watch.observe(state(halt(NAMES[0]), checked.state))
    watch.observe(fired_file())
    attested = [transition(h, L.ATTESTED, at=T1) for h in fired_file().halts]
    watch.observe(state(*(r.state for r in attested if isinstance(r, Transitioned))))
    assert not watch.tampered


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["armed", "fired", "removed", "other-id"]), max_size=8))
def test_once_seen_fired_a_halt_stays_fired_whatever_the_file_says(reads: list[str]) -> None:
    files = {
        "armed": armed(),
        "fired": fired_file(),
        "other-id": state(*armed().halts, dispatch_id="x"),
    }
    watch = watched()
    seen = False
    for read in reads:
        watch.observe(files.get(read), "it was removed" if read == "removed" else None)
        seen = seen or read == "fired"
        assert (NAMES[0] in names(watch)) is seen
        # Backwards after a firing, or an unreadable or foreign file, is always tampering.
        if read in ("removed", "other-id") or (seen and read == "armed"):
            assert watch.tampered
    assert firings(fired_file())[0].severity is HaltSeverity.BLOCK
    assert dataclasses.replace(watch).dispatch_id == "d1"
