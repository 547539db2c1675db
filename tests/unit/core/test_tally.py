"""Blind rankings -> winner: first choices, Borda for ties, a seeded order last, quorum."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.core.tally import is_usable, quorum_for, seeded_key, tally
from assay.core.vocab import TieBreak

ABC = ["A", "B", "C"]


def test_most_first_choices_wins() -> None:
    result = tally(ABC, 3, [["B", "A", "C"], ["B", "C", "A"], ["A", "B", "C"]], seed="s")
    assert result.winner == "B"
    assert result.first_choices == {"A": 1, "B": 2, "C": 0}
    assert result.borda == {"A": 3, "B": 5, "C": 1}
    assert (result.present, result.quorum, result.met_quorum) == (3, 2, True)
    assert result.tie_break is None
    assert not result.uncontested


def test_borda_only_breaks_a_first_choice_tie() -> None:
    # A and B tie on first choices; A has more Borda points. C has the most Borda points
    # of all but no first choice, and Borda never overrides first choices.
    rankings = [["A", "C", "B"], ["B", "C", "A"], ["A", "C", "B"], ["B", "A", "C"]]
    result = tally(ABC, 4, rankings, seed="s")
    assert result.first_choices == {"A": 2, "B": 2, "C": 0}
    assert result.borda == {"A": 5, "B": 4, "C": 3}
    assert result.winner == "A"
    assert result.tie_break is TieBreak.BORDA


def test_first_choices_beat_borda() -> None:
    rankings = [["A", "C", "B"], ["A", "C", "B"], ["B", "C", "A"], ["C", "B", "A"]]
    result = tally(ABC, 4, rankings, seed="s")
    assert result.winner == "A"
    assert result.tie_break is None


def test_full_tie_falls_to_the_seeded_order() -> None:
    rankings = [["A", "B"], ["B", "A"]]
    winners = set()
    for seed in (f"seed-{i}" for i in range(20)):
        result = tally(["A", "B"], 2, rankings, seed=seed)
        assert result.tie_break is TieBreak.SEED
        assert result.winner == min(["A", "B"], key=lambda label: seeded_key(seed, label))
        winners.add(result.winner)
    assert winners == {"A", "B"}  # the seed, not the label, decides


def test_one_viable_candidate_is_uncontested_and_needs_no_judge() -> None:
    result = tally(["A"], 0, [], seed="s")
    assert result.winner == "A"
    assert result.uncontested
    assert result.met_quorum
    assert result.present == 0


def test_no_viable_candidate_has_no_winner() -> None:
    result = tally([], 3, [None, None, None], seed="s")
    assert result.winner is None
    assert not result.met_quorum
    assert not result.uncontested


def test_quorum_counts_judges_asked() -> None:
    assert [quorum_for(n) for n in range(6)] == [1, 1, 2, 2, 3, 3]


def test_without_quorum_there_is_no_winner() -> None:
    result = tally(ABC, 3, [["A", "B", "C"], None, ["A", "B"]], seed="s")
    assert result.present == 1
    assert result.quorum == 2
    assert not result.met_quorum
    assert result.winner is None
    assert result.first_choices == {"A": 1, "B": 0, "C": 0}


def test_missing_judges_count_as_absent() -> None:
    result = tally(ABC, 5, [["A", "B", "C"], ["B", "A", "C"]], seed="s")
    assert (result.present, result.quorum, result.met_quorum) == (2, 3, False)


def test_two_candidates_and_no_judges_cannot_pick() -> None:
    result = tally(["A", "B"], 0, [], seed="s")
    assert result.winner is None
    assert not result.met_quorum


@pytest.mark.parametrize(
    "ranking",
    [
        None,
        [],
        ["A", "B"],
        ["A", "B", "B"],
        ["A", "B", "C", "D"],
        ["A", "B", "D"],
        ["A", "A", "B", "C"],
        "ABC",
        ["A", "B", 3],
    ],
)
def test_only_full_permutations_are_usable(ranking: object) -> None:
    assert not is_usable(ranking, ABC)  # type: ignore[arg-type]


def test_a_permutation_is_usable() -> None:
    assert is_usable(("C", "A", "B"), ABC)


@pytest.mark.parametrize(
    ("candidates", "judges", "rankings"),
    [(["A", "A"], 1, []), (ABC, -1, []), (ABC, 1, [None, None])],
)
def test_caller_errors_are_refused(
    candidates: list[str], judges: int, rankings: list[list[str] | None]
) -> None:
    with pytest.raises(ValueError):
        tally(candidates, judges, rankings, seed="s")


@st.composite
def rounds(draw: st.DrawFn) -> tuple[list[str], int, list[list[str] | None], str]:
    n = draw(st.integers(min_value=0, max_value=5))
    candidates = [chr(ord("A") + i) for i in range(n)]
    judges = draw(st.integers(min_value=0, max_value=7))
    ranking = st.one_of(
        st.none(),
        st.permutations(candidates).map(list),
        st.lists(st.sampled_from([*candidates, "Z"]), max_size=n + 1),
    )
    rankings = draw(st.lists(ranking, max_size=judges))
    seed = draw(st.text(max_size=8))
    return candidates, judges, rankings, seed


@given(rounds())
def test_winner_is_always_a_candidate_and_needs_quorum(
    round_: tuple[list[str], int, list[list[str] | None], str],
) -> None:
    candidates, judges, rankings, seed = round_
    result = tally(candidates, judges, rankings, seed)
    if result.winner is not None:
        assert result.winner in candidates
        assert result.met_quorum
    if len(candidates) >= 2:
        assert result.met_quorum is (result.present >= result.quorum)
        assert (result.winner is not None) is result.met_quorum
    assert result.present == sum(1 for r in rankings if is_usable(r, candidates))
    assert sum(result.first_choices.values()) == result.present


@given(rounds(), st.randoms(use_true_random=False))
def test_judge_order_does_not_change_the_result(
    round_: tuple[list[str], int, list[list[str] | None], str], rng: object
) -> None:
    candidates, judges, rankings, seed = round_
    shuffled = list(rankings)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    assert tally(candidates, judges, shuffled, seed) == tally(candidates, judges, rankings, seed)


@given(rounds())
def test_same_inputs_same_result(
    round_: tuple[list[str], int, list[list[str] | None], str],
) -> None:
    candidates, judges, rankings, seed = round_
    first = tally(candidates, judges, rankings, seed)
    assert tally(list(candidates), judges, [list(r) if r else r for r in rankings], seed) == first


def test_an_empty_ranking_of_no_candidates_is_not_a_ranking() -> None:
    assert tally([], 1, [[]], seed="s").present == 0
