"""A run's counts read back from its event log, and a graph that raises keeps them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.repo import make_repo, replay_contract

from assay.adapters.store.records import Event
from assay.adapters.store.sql import Ledger
from assay.core.contract import parse_contract
from assay.core.tasks import Task
from assay.core.vocab import AttemptOutcome, Stage
from assay.engine.local import executor as local
from assay.engine.local.journal import read_journal
from assay.engine.local.runner import run_task

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _events(*entries: tuple[str, dict[str, Any]]) -> list[Event]:
    return [Event(id=i, at=AT, kind=k, data=d) for i, (k, d) in enumerate(entries, 1)]


def test_a_started_dispatch_without_an_end_counts_and_is_not_viable() -> None:
    journal = read_journal(
        _events(
            ("run.started", {"base_commit": "abc", "base_branch": "main"}),
            ("dispatch.started", {"attempt": 1, "seat": 1, "coder": "command"}),
            ("dispatch.started", {"attempt": 1, "seat": 2, "coder": "claude"}),
            ("seat.finished", {"attempt": 1, "seat": 1, "files": ["a", "b"], "viable": True}),
        ),
        dispatch_id="r1",
        fault="killed",
    )
    assert (journal.base_commit, journal.base_branch) == ("abc", "main")
    assert [(d.seat, d.coder, d.viable, d.files_changed) for d in journal.dispatches] == [
        (1, "command", True, 2),
        (2, "claude", False, 0),
    ]
    (attempt,) = journal.attempts
    assert attempt.outcome is AttemptOutcome.ERROR
    assert attempt.coder_dispatches == 2 and attempt.failures == ["killed"]


def test_a_decided_attempt_keeps_its_outcome_and_the_cut_one_is_an_error() -> None:
    journal = read_journal(
        _events(
            ("dispatch.started", {"attempt": 1, "seat": 1, "coder": "command"}),
            ("seat.finished", {"attempt": 1, "seat": 1, "files": ["a"], "viable": True}),
            ("attempt.decided", {"attempt": 1, "outcome": "blocked", "failures": ["tests: no"]}),
            ("dispatch.started", {"attempt": 2, "seat": 1, "coder": "command"}),
        ),
        dispatch_id="r1",
        fault="killed",
    )
    assert [(a.attempt, a.outcome, a.failures) for a in journal.attempts] == [
        (1, AttemptOutcome.BLOCKED, ["tests: no"]),
        (2, AttemptOutcome.ERROR, ["killed"]),
    ]
    assert [d.dispatch_id for d in journal.dispatches] == ["r1.a1.s1", "r1.a2.s1"]


@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3)), max_size=12))
def test_attempts_declare_exactly_their_dispatch_records(started: list[tuple[int, int]]) -> None:
    # Attempts start in order, so the numbers present are always 1..n.
    top = max((a for a, _ in started), default=0)
    pairs = sorted(set(started) | {(a, 1) for a in range(1, top + 1)})
    journal = read_journal(
        _events(*(("dispatch.started", {"attempt": a, "seat": s}) for a, s in pairs)),
        dispatch_id="r",
        fault="f",
    )
    assert [a.attempt for a in journal.attempts] == list(range(1, top + 1))
    assert sum(a.coder_dispatches for a in journal.attempts) == len(journal.dispatches)
    for record in journal.attempts:
        mine = [d for d in journal.dispatches if d.attempt == record.attempt]
        assert record.coder_dispatches == len(mine)


def test_a_graph_that_raises_after_dispatch_records_the_coder_that_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("a validator adapter bug")

    monkeypatch.setattr(local.LocalEffects, "validate", broken)
    repo = make_repo(tmp_path)
    contract = parse_contract(replay_contract(repo, "fixed").read_text())
    home = repo.root / ".assay"
    home.mkdir()
    with Ledger.open(f"sqlite:///{home / 'assay.db'}") as ledger:
        task = Task.new(id="t1", title="t", instruction=contract.task, now=datetime.now(UTC))
        ledger.add_task(task)
        report = run_task(
            repo=repo.root, home=home, ledger=ledger, task=task, contract=contract, env={}
        )
        payload = json.loads(report.payload_path.read_text())
        assert payload["halt_type"] == "internal_error"
        assert payload["attempts"]["total"] == 1
        assert payload["attempts"]["coder_dispatches"] == 1
        assert len(ledger.dispatches(report.run_id)) == 1
        assert ledger.ledger("t1").stage_state[Stage.DISPATCH].attempts == 1
        kinds = [e.kind for e in ledger.events(run_id=report.run_id)]
        assert kinds.count("dispatch.started") == 1  # journaled once, not again at close
