"""with_canonical_halts(): a contract's halts on top of the canonical seven, as a merge rule."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from assay.core.halts import CANONICAL_HALTS, SEVERITY_RANK, with_canonical_halts
from assay.core.vocab import HaltSeverity

SEVEN = [(name.value, severity) for name, severity in CANONICAL_HALTS.items()]

_own = st.from_regex(r"halt-own-[a-z]{1,8}", fullmatch=True)
_raised = st.sampled_from(SEVEN).flatmap(
    lambda pair: st.sampled_from(
        [s for s in HaltSeverity if SEVERITY_RANK[s] <= SEVERITY_RANK[pair[1]]]
    ).map(lambda severity: (pair[0], severity))
)
_entry = st.one_of(st.tuples(_own, st.sampled_from(HaltSeverity)), _raised)
# What a contract may declare: its own halts and canonical ones (kept or raised), none twice.
declared_lists = st.lists(_entry, unique_by=lambda pair: pair[0], max_size=12)


@given(declared_lists)
def test_every_canonical_halt_is_armed_exactly_once(
    declared: list[tuple[str, HaltSeverity]],
) -> None:
    names = [name for name, _ in with_canonical_halts(declared)]
    assert len(names) == len(set(names))
    assert {name for name, _ in SEVEN} <= set(names)


@given(declared_lists)
def test_what_is_declared_is_kept_as_written_in_its_order(
    declared: list[tuple[str, HaltSeverity]],
) -> None:
    armed = with_canonical_halts(declared)
    assert armed[len(armed) - len(declared) :] == declared
    added = armed[: len(armed) - len(declared)]
    assert added == [pair for pair in SEVEN if pair[0] not in dict(declared)]


@given(declared_lists)
def test_merging_again_changes_nothing(declared: list[tuple[str, HaltSeverity]]) -> None:
    once = with_canonical_halts(declared)
    assert with_canonical_halts(once) == once


@given(st.permutations(SEVEN), st.lists(st.tuples(_own, st.sampled_from(HaltSeverity)), max_size=3))
def test_a_list_with_all_seven_is_armed_as_it_always_was(
    seven: list[tuple[str, HaltSeverity]], own: list[tuple[str, HaltSeverity]]
) -> None:
    declared = list(seven) + list({name: sev for name, sev in own}.items())
    assert with_canonical_halts(declared) == declared


def test_nothing_declared_arms_the_seven_at_their_canonical_severities() -> None:
    assert with_canonical_halts([]) == SEVEN
