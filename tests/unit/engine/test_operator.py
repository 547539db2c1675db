"""An operator's moves through ``engine.operator`` on a real ledger (SQLite, and PostgreSQL
when reachable): the lifecycle decides, the task and its ``task.saved`` event are one write,
and a move racing a run start never half-happens."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from assay.adapters.actor import cli_actor
from assay.adapters.store import halt_ops
from assay.adapters.store import statements as st
from assay.adapters.store.errors import LedgerConflict, TaskNotFound
from assay.adapters.store.schema import runs
from assay.adapters.store.sql import Ledger
from assay.core.halts import CANONICAL_HALTS
from assay.core.tasks import Task
from assay.core.vocab import ActorVia, EventKind, HoldSource, OperatorMove, TaskStatus
from assay.engine.operations.moves import (
    Actor,
    MoveRefused,
    RearmRefused,
    move_task,
    rearm_halt,
)

T0 = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
WEB = Actor(by="ada", via=ActorVia.WEB)


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'assay.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    opened = Ledger.open(url)
    try:
        yield opened
    finally:
        opened.close()


def _add(ledger: Ledger, task_id: str = "t1") -> Task:
    task = Task.new(id=task_id, title="fix it", instruction="fix the bug", now=T0)
    ledger.add_task(task)
    return task


def _saved(ledger: Ledger, task_id: str = "t1") -> list[dict[str, object]]:
    return [e.data for e in ledger.events(task_id) if e.kind == EventKind.TASK_SAVED]


def test_hold_then_release_records_who_and_where(ledger: Ledger) -> None:
    _add(ledger)
    held = move_task(ledger, "t1", OperatorMove.HOLD, actor=WEB, now=T0, reason="  not yet ")
    assert (held.task.status, held.task.hold_source) == (TaskStatus.HELD, HoldSource.MANUAL)
    assert held.task.hold_reason == "not yet"
    assert held.note == " (a manual hold: `assay task release t1` lets it run again)"
    released = move_task(ledger, "t1", OperatorMove.RELEASE, actor=cli_actor(), now=T0)
    assert released.task.status is TaskStatus.QUEUED
    assert released.note == " (attempts reset to 0; run history kept)"
    stored = ledger.get_task("t1")
    assert stored.status is TaskStatus.QUEUED and stored.hold_reason is None
    hold_event, release_event = _saved(ledger)
    assert hold_event == {
        "status": "held",
        "action": "hold",
        "by": "ada",
        "via": "web",
        "reason": "not yet",
    }
    assert release_event["action"] == "release" and release_event["via"] == "cli"
    assert str(release_event["by"]).count("@") == 1 and release_event["reason"] is None


def test_cancel_holds_with_the_cancel_reason(ledger: Ledger) -> None:
    _add(ledger)
    moved = move_task(ledger, "t1", OperatorMove.CANCEL, actor=WEB, now=T0)
    assert moved.task.status is TaskStatus.HELD
    assert moved.task.hold_reason == "cancelled by an operator"
    assert _saved(ledger)[-1]["action"] == "cancel"


def test_release_of_a_waiting_task_clears_the_wait_and_keeps_attempts(ledger: Ledger) -> None:
    task = _add(ledger)
    task.start(T0, run_id="r1")
    ledger.start_run(task, "r1")
    # the quota case: settle's close is a refund with a wait; stand in the ledger's state
    with ledger._write() as conn:  # what close_run leaves: failed, 1 attempt, a wait
        task.status = TaskStatus.FAILED
        task.not_before = T0 + timedelta(hours=1)
        st.update_task(conn, task)
        conn.execute(runs.update().values(finished_at=T0))
    moved = move_task(ledger, "t1", OperatorMove.RELEASE, actor=WEB, now=T0)
    assert moved.task.not_before is None and moved.task.attempts == 1
    assert moved.note == " (its wait is cleared; attempts kept: 1)"


@pytest.mark.parametrize(
    ("move", "expected"),
    [
        (
            OperatorMove.RELEASE,
            "cannot release task 't1': it is queued, and only a held task, or a queued or "
            "failed one that waits for its quota, can be released",
        ),
        (OperatorMove.HOLD, None),
    ],
)
def test_refusals_say_the_lifecycle_and_write_nothing(
    ledger: Ledger, move: OperatorMove, expected: str | None
) -> None:
    _add(ledger)
    if expected is None:  # a second hold of a held task
        move_task(ledger, "t1", OperatorMove.HOLD, actor=WEB, now=T0)
        expected = (
            "cannot hold task 't1': it is held, and only a failed or queued task can be held "
            "(it is held already: `assay task release t1` lets it run again)"
        )
    before = ledger.events("t1")
    with pytest.raises(MoveRefused, match=expected.replace("(", r"\(").replace(")", r"\)")):
        move_task(ledger, "t1", move, actor=WEB, now=T0 + timedelta(minutes=1))
    assert ledger.events("t1") == before
    with pytest.raises(TaskNotFound):
        move_task(ledger, "nope", OperatorMove.HOLD, actor=WEB, now=T0)


def test_a_running_task_is_refused_by_its_lifecycle(ledger: Ledger) -> None:
    task = _add(ledger)
    task.start(T0, run_id="r1")
    ledger.start_run(task, "r1")
    for move in OperatorMove:
        with pytest.raises(MoveRefused, match=f"cannot {move.value} task 't1': it is running"):
            move_task(ledger, "t1", move, actor=WEB, now=T0)
    assert ledger.get_task("t1").status is TaskStatus.RUNNING
    assert _saved(ledger) == []


def test_each_refusal_speaks_of_the_move_asked_for(ledger: Ledger) -> None:
    """A done task cannot be cancelled: the refusal says cancel, never another move's verb."""
    task = _add(ledger)
    task.start(T0, run_id="r1")
    ledger.start_run(task, "r1")
    with ledger._write() as conn:  # the run landed: the task is done
        task.status = TaskStatus.DONE
        st.update_task(conn, task)
        conn.execute(runs.update().values(finished_at=T0))
    said = {}
    for move in OperatorMove:
        with pytest.raises(MoveRefused) as refused:
            move_task(ledger, "t1", move, actor=WEB, now=T0)
        said[move] = str(refused.value)
    assert said[OperatorMove.CANCEL] == (
        "cannot cancel task 't1': it is done, and only a failed or queued task can be cancelled"
    )
    assert said[OperatorMove.HOLD].startswith("cannot hold task 't1': it is done,")
    assert said[OperatorMove.RELEASE].startswith("cannot release task 't1': it is done,")
    for move, text in said.items():  # no move borrows another's words
        others = {m.value for m in OperatorMove} - {move.value}
        assert not any(f"cannot {other}" in text for other in others), text


def test_the_move_acts_on_the_ledger_as_it_is_not_a_stale_copy(ledger: Ledger) -> None:
    stale = _add(ledger)  # what a page showed before a worker ran the task
    task = ledger.get_task("t1")
    task.start(T0, run_id="r1")
    ledger.start_run(task, "r1")
    with ledger._write() as conn:  # the run closed failed: one attempt spent
        task.status = TaskStatus.FAILED
        st.update_task(conn, task)
        conn.execute(runs.update().values(finished_at=T0))
    assert stale.attempts == 0
    held = move_task(ledger, "t1", OperatorMove.HOLD, actor=WEB, now=T0)
    assert held.task.attempts == 1 and ledger.get_task("t1").attempts == 1


def test_task_and_event_are_one_transaction(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    _add(ledger)

    def broken(*_args: object, **_kwargs: object) -> int:
        raise LedgerConflict("the event log refused the write")

    monkeypatch.setattr(st, "append_event", broken)
    with pytest.raises(MoveRefused, match="the event log refused"):
        move_task(ledger, "t1", OperatorMove.HOLD, actor=WEB, now=T0)
    monkeypatch.undo()
    assert ledger.get_task("t1").status is TaskStatus.QUEUED
    assert _saved(ledger) == []


def _race(ledger: Ledger, task_id: str, run_id: str) -> dict[str, str]:
    """A run start and a hold of the same queued task, released at the same moment."""
    task = _add(ledger, task_id)
    task.start(T0, run_id=run_id)
    gate = threading.Barrier(2)
    outcome: dict[str, str] = {}

    def start() -> None:
        gate.wait()
        try:
            ledger.start_run(task, run_id)
            outcome["start"] = "won"
        except LedgerConflict:
            outcome["start"] = "lost"

    def hold() -> None:
        gate.wait()
        try:
            move_task(ledger, task_id, OperatorMove.HOLD, actor=WEB, now=T0)
            outcome["hold"] = "won"
        except MoveRefused:
            outcome["hold"] = "lost"

    threads = [threading.Thread(target=start), threading.Thread(target=hold)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcome


def test_a_hold_racing_a_run_start_is_all_or_nothing(ledger: Ledger) -> None:
    for n in range(8):
        task_id, run_id = f"race{n}", f"r{n}"
        outcome = _race(ledger, task_id, run_id)
        assert sorted(outcome.values()) == ["lost", "won"], outcome
        stored = ledger.get_task(task_id)
        runs = ledger.runs(task_id)
        if outcome["hold"] == "won":
            assert stored.status is TaskStatus.HELD and runs == []
            assert len(_saved(ledger, task_id)) == 1
        else:
            assert stored.status is TaskStatus.RUNNING and [r.id for r in runs] == [run_id]
            assert _saved(ledger, task_id) == []


BLOCK = "halt-scope-breach"


def _fired_run(ledger: Ledger, state_dir: Path) -> None:
    """Task t1's run r1 (dispatch d1) with its scope-breach halt fired in the state file."""
    task = _add(ledger)
    task.start(T0, run_id="r1")
    ledger.start_run(task, "r1", dispatch_id="d1")
    contract = state_dir.parent / "contract.yaml"
    halts = "".join(f"  - {{name: {n}, severity: {s}}}\n" for n, s in CANONICAL_HALTS.items())
    contract.write_text(f"task: fix it\nhalt_classes:\n{halts}", encoding="utf-8")
    assert halt_ops.arm(contract, "d1", state_dir)[1] == 0
    fired, code = halt_ops.check("d1", BLOCK, state_dir, fire=True, evidence="touched .github")
    assert fired["fired"] is True and code == 1


def test_rearm_a_fired_halt_journals_who_and_why(ledger: Ledger, tmp_path: Path) -> None:
    state_dir = tmp_path / "halt-state"
    _fired_run(ledger, state_dir)
    document = rearm_halt(
        ledger,
        state_dir=state_dir,
        run_id="r1",
        condition=BLOCK,
        evidence="the workflow edit was reverted",
        actor=WEB,
        now=T0,
    )
    assert document["rearmed"] is True and document["current_state"]["lifecycle"] == "ARMED"
    (event,) = [e for e in ledger.events("t1") if e.kind == EventKind.HALT_REARMED]
    assert (event.task_id, event.run_id) == ("t1", "r1")
    assert event.data == {
        "dispatch_id": "d1",
        "condition": BLOCK,
        "evidence": "the workflow edit was reverted",
        "by": "ada",
        "via": "web",
    }


@pytest.mark.parametrize(
    ("condition", "evidence", "where", "expected"),
    [
        (BLOCK, "  ", "halt-state", "needs evidence"),
        (BLOCK, "fixed", "elsewhere", "not on this machine"),
        ("halt-budget-exhausted", "fixed", "halt-state", "ARMED"),  # armed, never fired
        ("halt-nope", "fixed", "halt-state", "not armed in this dispatch"),
    ],
)
def test_rearm_refusals_write_nothing(
    ledger: Ledger, tmp_path: Path, condition: str, evidence: str, where: str, expected: str
) -> None:
    state_dir = tmp_path / "halt-state"
    _fired_run(ledger, state_dir)
    before = ledger.events()
    with pytest.raises(RearmRefused, match=expected):
        rearm_halt(
            ledger,
            state_dir=tmp_path / where,
            run_id="r1",
            condition=condition,
            evidence=evidence,
            actor=WEB,
            now=T0,
        )
    assert ledger.events() == before
    assert halt_ops.check("d1", BLOCK, state_dir)[0]["current_state"]["lifecycle"] == "FIRED"
