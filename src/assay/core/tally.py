"""Blind rankings -> a winner, or no winner when too few judges gave a usable ranking.

Judges rank the viable candidates by blind label, best first. The tally is:

- **Usable rankings only.** A ranking counts only if it is a full permutation of the viable
  labels: every label exactly once, nothing else. A partial, padded or garbled ranking is
  treated like a judge that gave none, because filling its gaps would be guessing for it.
- **Quorum.** ``judges // 2 + 1`` of the judges asked must give a usable ranking; otherwise
  there is no winner (the run stalls).
- **Winner.** Most first choices. Borda points (``n - 1`` for first ... ``0`` for last) only
  break a tie on first choices; a tie on both falls to a seeded order: the lowest
  ``sha256(seed NUL label)``, which is deterministic and needs no random state.

One viable candidate wins uncontested and needs no judge; no viable candidate has no winner.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from assay.core.vocab import TieBreak


class Tally(BaseModel):
    """The outcome of a blind ranking round, with the counts behind it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    winner: str | None
    first_choices: dict[str, int]
    borda: dict[str, int]
    present: int = Field(ge=0)
    quorum: int = Field(ge=1)
    met_quorum: bool
    uncontested: bool
    tie_break: TieBreak | None = None


def quorum_for(judges: int) -> int:
    """How many usable rankings a round of ``judges`` judges needs."""
    return judges // 2 + 1


def is_usable(ranking: Sequence[str] | None, candidates: Sequence[str]) -> bool:
    """True when ``ranking`` is a full permutation of ``candidates``: no repeats, no strangers."""
    if not candidates or ranking is None or isinstance(ranking, str | bytes):
        return False
    items = list(ranking)
    if not all(isinstance(item, str) for item in items):
        return False
    return len(items) == len(candidates) and set(items) == set(candidates)


def seeded_key(seed: str, label: str) -> str:
    """The final tie-break key: the lowest wins. Same seed and label, same key, everywhere."""
    return hashlib.sha256(f"{seed}\x00{label}".encode()).hexdigest()


def tally(
    candidates: Sequence[str],
    judges: int,
    rankings: Sequence[Sequence[str] | None],
    seed: str,
) -> Tally:
    """Tally ``rankings`` (one per judge asked, ``None`` for no ranking) over ``candidates``.

    ``judges`` is how many judges were asked; a judge without an entry in ``rankings`` gave
    no ranking. Raises ``ValueError`` only for inputs the caller controls: duplicate candidate
    labels, a negative judge count, or more rankings than judges.
    """
    if judges < 0:
        raise ValueError(f"judges must be at least 0, got {judges}")
    if len(set(candidates)) != len(candidates):
        raise ValueError(f"candidate labels must be distinct, got {list(candidates)}")
    if len(rankings) > judges:
        raise ValueError(f"{len(rankings)} rankings from {judges} judges")
    labels = list(candidates)
    usable = [list(r) for r in rankings if r is not None and is_usable(r, labels)]
    first_choices = {label: 0 for label in labels}
    borda = {label: 0 for label in labels}
    for ranking in usable:
        first_choices[ranking[0]] += 1
        for place, label in enumerate(ranking):
            borda[label] += len(labels) - 1 - place
    quorum = quorum_for(judges)

    def result(
        winner: str | None, met: bool, uncontested: bool = False, rule: TieBreak | None = None
    ) -> Tally:
        return Tally(
            winner=winner,
            first_choices=first_choices,
            borda=borda,
            present=len(usable),
            quorum=quorum,
            met_quorum=met,
            uncontested=uncontested,
            tie_break=rule,
        )

    if not labels:
        return result(None, met=False)
    if len(labels) == 1:
        return result(labels[0], met=True, uncontested=True)
    if len(usable) < quorum:
        return result(None, met=False)
    leaders = _best(labels, first_choices)
    if len(leaders) == 1:
        return result(leaders[0], met=True)
    leaders = _best(leaders, borda)
    if len(leaders) == 1:
        return result(leaders[0], met=True, rule=TieBreak.BORDA)
    winner = min(leaders, key=lambda label: (seeded_key(seed, label), label))
    return result(winner, met=True, rule=TieBreak.SEED)


def _best(labels: list[str], score: dict[str, int]) -> list[str]:
    top = max(score[label] for label in labels)
    return [label for label in labels if score[label] == top]
