"""The judges' tally as the run page reads it from a ``judges.ranked`` event: scores best
first, each judge's answer per round, and whatever a hostile or older event holds read as
unknown or bounded, never a crash."""

from __future__ import annotations

from assay.web.view_judges import MAX_JUDGES, MAX_REASONS, tally_view


def test_scores_and_judges_are_read_best_first_and_per_round() -> None:
    view = tally_view(
        2,
        {
            "winner": "B", "present": 3, "quorum": 2, "tie_break": "borda",
            "first_choices": {"A": 1, "B": 1, "C": 1}, "borda": {"A": 2, "B": 4, "C": 0},
            "judges": [
                {"judge": 1, "name": "llm m", "round": 0, "ranking": ["B", "A", "C"],
                 "reasons": "B is cleaner", "reasons_cut": 0, "error": None},
                {"judge": 1, "name": "llm m", "round": 1, "ranking": None, "reasons": "",
                 "error": "deliberation gave no usable ranking"},
            ],
        },
    )  # fmt: skip
    assert (view.attempt, view.winner, view.met, view.tie_break) == (2, "B", True, "borda")
    assert view.votes == [("A", 1), ("B", 1), ("C", 1)]
    assert view.borda == [("B", 4), ("A", 2), ("C", 0)]
    assert [(j.judge, j.round, j.ranking) for j in view.judges] == [
        (1, 0, ["B", "A", "C"]),
        (1, 1, None),
    ]
    assert view.deliberated and view.judges[1].error == "deliberation gave no usable ranking"


def test_an_older_or_hostile_event_reads_as_unknown_or_bounded() -> None:
    assert tally_view(1, {"winner": "A", "present": 1, "quorum": 1}).judges == []
    huge = "x" * (MAX_REASONS + 5)
    junk = [
        "not a judge", {"judge": "one"}, {"judge": True},
        {"judge": 2, "ranking": "A", "reasons": 7, "round": -3, "reasons_cut": "many"},
        {"judge": 3, "reasons": huge, "reasons_cut": 10, "ranking": ["A"] * 100},
    ] + [{"judge": 4}] * (MAX_JUDGES * 2)  # fmt: skip
    view = tally_view(
        1, {"winner": 5, "present": "2", "first_choices": [1], "borda": {"A": "x"}, "judges": junk}
    )
    assert (view.winner, view.present, view.met, view.votes, view.borda) == (None, 0, False, [], [])
    assert len(view.judges) <= MAX_JUDGES
    two, three = view.judges[0], view.judges[1]
    assert (two.judge, two.round, two.ranking, two.reasons, two.reasons_cut) == (2, 0, None, "", 0)
    assert len(three.reasons) == MAX_REASONS and three.reasons_cut == 15
    assert three.ranking is not None and len(three.ranking) == 26
