"""The dashboard's read models over a ledger filled by real runs (in this process), on SQLite
and PostgreSQL."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from support.in_process import watch_while
from support.repo import FIXED, git

from assay.core.vocab import EventKind
from assay.engine.recovery.refunds import refund_streak
from assay.web import views
from assay.web.views import AttemptState, SeatState

if TYPE_CHECKING:
    from conftest import World

STANDINS = Path(__file__).resolve().parents[2] / "support" / "standins"


def test_the_queue_lists_every_task_newest_first_with_its_budgets(world: World) -> None:
    with world.ledger() as ledger:
        page = views.queue_page(ledger)
    assert [r.task_id for r in page.rows] == [
        world.queued_task,
        world.halted_task,
        world.held_task,
        world.done_task,
    ]
    assert page.counts == {"all": 4, "done": 1, "held": 2, "queued": 1}
    assert (page.total, page.pages, page.page) == (4, 1, 1)
    assert page.last_event_id > 0
    rows = {r.task_id: r for r in page.rows}
    done = rows[world.done_task]
    assert done.status == "done" and done.attempts_spent == 1
    assert (done.max_attempts, done.attempts_remaining, done.max_refunds) == (3, 2, 3)
    assert done.last_run is not None and done.last_run.run_id == world.pass_run
    assert done.last_run.status == "merged" and done.last_run.settle_row == "succeeded"
    held = rows[world.held_task]
    assert held.hold_reason == "waiting for the API freeze" and held.hold_source == "manual"
    assert held.last_run is None and held.refund_streak == 0
    halted = rows[world.halted_task]
    assert halted.status == "held" and halted.hold_source == "machine"
    assert "halt-scope-breach" in (halted.hold_reason or "")


def test_the_queue_filters_by_status_and_pages(world: World) -> None:
    with world.ledger() as ledger:
        held = views.queue_page(ledger, status="held")
        second = views.queue_page(ledger, per_page=1, page=2)
        past_the_end = views.queue_page(ledger, per_page=3, page=99)
        nothing = views.queue_page(ledger, status="failed")
        clamped = views.queue_page(ledger, page=-3, per_page=0)
        unknown = views.queue_page(ledger, status="sideways")
    assert {r.task_id for r in held.rows} == {world.held_task, world.halted_task}
    assert held.total == 2 and held.counts["all"] == 4
    assert [r.task_id for r in second.rows] == [world.halted_task] and second.pages == 4
    assert past_the_end.page == 2 and [r.task_id for r in past_the_end.rows] == [world.done_task]
    assert nothing.rows == [] and (nothing.total, nothing.pages) == (0, 1)
    assert (clamped.page, clamped.per_page, len(clamped.rows)) == (1, 1, 1)
    assert unknown.rows == [] and unknown.total == 0


def test_a_task_page_has_its_runs_and_none_for_an_unknown_task(world: World) -> None:
    with world.ledger() as ledger:
        done = views.task_view(ledger, world.done_task)
        assert views.task_view(ledger, "no-such-task") is None
    assert done is not None
    assert done.instruction == "Make slugify keep digits."
    assert [r.run_id for r in done.runs] == [world.pass_run]
    assert done.actions == []  # the CLI's hold of another task is not this one's


def test_a_blocked_then_passed_run_shows_both_attempts(world: World) -> None:
    with world.ledger() as ledger:
        run = views.run_view(ledger, world.pass_run, state_dir=world.state_dir)
        assert views.run_view(ledger, "no-such-run", state_dir=None) is None
    assert run is not None and run.run.status == "merged" and not run.run.open
    assert run.title == "Make slugify keep digits."
    first, second = run.attempts
    assert (first.state, second.state) == (AttemptState.BLOCKED, AttemptState.PASS)
    assert first.next == "recover" and second.next == "land"
    assert first.failures and first.failures[0].startswith("tests: ")
    assert first.started_at is not None and first.decided_at is not None
    assert [(s.seat, s.coder, s.state, s.chosen) for s in second.seats] == [
        (1, "replay", SeatState.VIABLE, True)
    ]
    assert second.seats[0].files == ["src/slug.py"]
    verdicts = [[(v.validator_id, v.severity) for v in a.validators] for a in (first, second)]
    assert ("tests", "block") in verdicts[0] and ("tests", "pass") in verdicts[1]
    assert {v for v, _ in verdicts[0]} >= {"scope", "secrets", "tests"}
    assert run.changed_files == ["src/slug.py"]
    assert run.diff is not None and "+" in run.diff and "isalnum" in run.diff
    assert not run.diff_truncated
    tests = next(v for v in first.validators if v.validator_id == "tests")
    assert "test_digits" in tests.justification + " ".join(tests.findings)
    assert run.land is not None and run.land["mode"] == "merge"
    assert run.payload_available and run.sandbox in ("bwrap", "none")
    # The replay coder calls no model: it spent nothing, and says so; its wall time is measured.
    assert run.totals.tokens == 0 and run.totals.cost_usd == 0.0
    assert run.totals.wall_time_ms is not None
    assert not any(h.lifecycle == "FIRED" for h in run.halts)  # attested at close
    assert {h.name for h in run.halts} >= {"halt-scope-breach", "halt-secret-exposure"}


def test_a_fired_block_halt_is_shown_with_its_rearm_command(world: World) -> None:
    with world.ledger() as ledger:
        here = views.run_view(ledger, world.halt_run, state_dir=world.state_dir)
        elsewhere = views.run_view(ledger, world.halt_run, state_dir=None)
        kept = ledger.run_document(world.halt_run)
    assert here is not None and elsewhere is not None
    assert here.run.status == "blocked" and here.run.task_status == "held"
    (attempt,) = here.attempts
    assert attempt.state == AttemptState.ERROR and "halt-scope-breach" in attempt.failures[0]
    fired = next(h for h in here.halts if h.name == "halt-scope-breach")
    assert (fired.lifecycle, fired.severity) == ("FIRED", "block")
    assert fired.detail == world.halt_evidence
    assert fired.rearmable_here and fired.fired_at
    assert fired.rearm_command == (
        f"assay halt rearm --dispatch-id {world.halt_run} --condition halt-scope-breach "
        f'--state-dir {world.state_dir} --evidence "<what was remedied>"'
    )
    # Without this machine's state files: the close's document, else the ledger's journal.
    far = next(h for h in elsewhere.halts if h.name == "halt-scope-breach")
    assert not far.rearmable_here and far.detail == world.halt_evidence
    assert far.lifecycle == ("FIRED" if kept is not None and kept.halt_states else None)


def test_the_halts_page_lists_the_fired_halt(world: World) -> None:
    with world.ledger() as ledger:
        page = views.halts_page(ledger, state_dir=world.state_dir)
        far = views.halts_page(ledger, state_dir=None)
    (row,) = page.rows
    assert (row.task_id, row.run_id, row.task_status) == (world.halted_task, world.halt_run, "held")
    assert row.halt.name == "halt-scope-breach" and row.halt.rearm_command
    assert page.total == 1 and page.last_event_id > 0
    assert [r.run_id for r in far.rows] == [world.halt_run]


def test_the_payload_document_of_a_closed_run(world: World) -> None:
    with world.ledger() as ledger:
        payload = views.payload_document(ledger, world.pass_run)
        assert views.payload_document(ledger, "no-such-run") is None
    assert payload is not None and payload["run_id"] == world.pass_run
    assert payload["attempts"]["total"] == 2


def test_a_run_closed_before_documents_were_kept_reads_its_payload_file(
    world_copy: World,
) -> None:
    database = world_copy.repo.root / ".assay" / "assay.db"
    with sqlite3.connect(database) as conn:
        conn.execute("DELETE FROM run_documents")
    with world_copy.ledger() as ledger:
        payload = views.payload_document(ledger, world_copy.pass_run)
        run = views.run_view(ledger, world_copy.pass_run, state_dir=None)
    assert payload is not None and payload["run_id"] == world_copy.pass_run
    assert run is not None and run.payload_available and run.diff is None
    assert run.land is not None and run.land["mode"] == "merge"


def test_malformed_run_events_are_skipped_not_raised(world_copy: World) -> None:
    at = datetime.now(UTC)
    junk: list[tuple[EventKind, dict[str, Any]]] = [
        (EventKind.SEAT_FINISHED, {"attempt": "one", "seat": 1}),
        (EventKind.SEAT_FINISHED, {"attempt": 2, "seat": None, "files": "nope"}),
        (EventKind.ATTEMPT_DECIDED, {"attempt": 2, "failures": "not a list", "seat": "x"}),
        (EventKind.VALIDATOR_FINISHED, {"attempt": 2, "findings": {"a": 1}}),
        (EventKind.JUDGES_RANKED, {"attempt": 2, "winner": 3, "present": "many"}),
        (EventKind.WARNING, {"message": ["not", "text"]}),
        (EventKind.HALT_FIRED, {"name": None}),
    ]
    with world_copy.ledger() as ledger:
        for kind, data in junk:
            ledger.append_event(
                kind, data, at=at, task_id=world_copy.done_task, run_id=world_copy.pass_run
            )
        run = views.run_view(ledger, world_copy.pass_run, state_dir=world_copy.state_dir)
    assert run is not None
    assert [a.state for a in run.attempts] == [AttemptState.BLOCKED, AttemptState.PASS]
    assert run.changed_files == ["src/slug.py"] and run.warnings == []
    assert run.attempts[1].seats[0].chosen and run.attempts[1].next == "land"
    assert "?" not in {v.validator_id for v in run.attempts[1].validators}


def test_an_unreadable_task_row_is_shown_not_raised(world_copy: World) -> None:
    database = world_copy.repo.root / ".assay" / "assay.db"
    edits = (
        ("hold_source = 'gremlins'", world_copy.held_task),
        ("status = 'sideways'", world_copy.queued_task),
        ("contract = 'not json'", world_copy.done_task),
    )
    with sqlite3.connect(database) as conn:
        for change, task_id in edits:
            conn.execute(f"UPDATE tasks SET {change} WHERE id = ?", (task_id,))
    with world_copy.ledger() as ledger:
        page = views.queue_page(ledger)
        unreadable = views.queue_page(ledger, status=views.UNREADABLE_STATUS)
        task = views.task_view(ledger, world_copy.held_task)
    rows = {r.task_id: r for r in page.rows}
    assert rows[world_copy.held_task].status == "unreadable"
    assert "hold_source" in (rows[world_copy.held_task].problem or "")
    assert rows[world_copy.queued_task].status == "unreadable"
    assert rows[world_copy.done_task].max_attempts is None  # its contract cannot be read
    assert page.counts["unreadable"] == 1  # by stored status: only the unknown one
    assert [r.task_id for r in unreadable.rows] == [world_copy.queued_task]
    assert task is not None and task.row.status == "unreadable"


def test_operator_moves_and_rearms_are_the_task_actions(world_copy: World) -> None:
    repo = world_copy.repo
    rearmed = repo.main(
        "halt",
        "rearm",
        "--dispatch-id",
        world_copy.halt_run,
        "--condition",
        "halt-scope-breach",
        "--evidence",
        "setup.cfg moved into scope",
    )
    assert rearmed.returncode == 0, rearmed.stderr
    released = repo.main("task", "release", world_copy.held_task)
    assert released.returncode == 0, released.stderr
    with world_copy.ledger() as ledger:
        halted = views.task_view(ledger, world_copy.halted_task)
        held = views.task_view(ledger, world_copy.held_task)
        here = views.run_view(ledger, world_copy.halt_run, state_dir=world_copy.state_dir)
        far = views.run_view(ledger, world_copy.halt_run, state_dir=None)
        halts = views.halts_page(ledger, state_dir=world_copy.state_dir)
    assert halted is not None and held is not None
    (rearm,) = halted.actions
    assert (rearm.action, rearm.via, rearm.reason, rearm.run_id) == (
        "rearm halt-scope-breach",
        "cli",
        "setup.cfg moved into scope",
        world_copy.halt_run,
    )
    assert "@" in rearm.by
    assert [(a.action, a.via, a.reason) for a in held.actions] == [
        ("hold", "cli", "waiting for the API freeze"),
        ("release", "cli", None),
    ]
    assert held.row.status == "queued"
    assert here is not None and far is not None
    breach = next(h for h in here.halts if h.name == "halt-scope-breach")
    assert breach.lifecycle == "ARMED" and breach.rearm_command is None
    assert breach.history and breach.history[0]["cleared"] == "FIRED"
    far_breach = next(h for h in far.halts if h.name == "halt-scope-breach")
    assert far_breach.lifecycle == "ARMED"  # the journaled re-arm, with no state file here
    assert halts.rows == []


def test_a_quota_refunded_run_counts_in_the_refund_streak(world_copy: World) -> None:
    search = os.pathsep.join([str(STANDINS), str(Path(sys.executable).parent), "/usr/bin:/bin"])
    standin = {"PATH": search, "STANDIN_SCENARIO": "rate_limit", "ANTHROPIC_API_KEY": "k"}
    env = json.dumps(standin)  # the stand-in calls no provider; claude never starts keyless
    contract = world_copy.repo.contract(
        "quota.yaml", f"task: x\ncoder: {{kind: claude}}\nland: merge\nenv: {env}\n"
    )
    done = world_copy.repo.main("run", "--contract", str(contract), "--json")
    assert done.returncode == 1, done.stderr
    payload = json.loads(done.stdout)
    with world_copy.ledger() as ledger:
        row = next(r for r in views.queue_page(ledger).rows if r.task_id == payload["task_id"])
        run = views.run_view(ledger, payload["run_id"], state_dir=world_copy.state_dir)
        expected = refund_streak(ledger, payload["task_id"]).count
    assert row.refund_streak == expected == 1 and row.attempts_spent == 0
    assert run is not None and run.attempts[0].seats[0].state == SeatState.LOST_TO_QUOTA


def test_an_open_run_is_read_from_its_events_while_it_runs(world_copy: World) -> None:
    repo = world_copy.repo
    git(repo.root, "reset", "-q", "--hard", "HEAD~1")  # before the merged fix again
    slow = f"sleep 2; {repo.put('fixed.py', 'src/slug.py')}"
    contract = repo.contract(
        "slow.yaml",
        f"""task: Make slugify keep digits, slowly.
coder: {{kind: replay, steps: [{{script: "{slow}"}}]}}
validators: [{{id: tests, kind: command, run: "{world_copy.check_command}"}}]
land: merge
""",
    )
    ledger = world_copy.ledger()

    def live_run() -> views.RunView | None:
        """The open run once it has a seat (None until then)."""
        open_runs = ledger.open_runs()
        if not open_runs:
            return None
        found = views.run_view(ledger, open_runs[0].id, state_dir=world_copy.state_dir)
        return found if found is not None and found.attempts and found.attempts[0].seats else None

    done, live = watch_while(
        lambda: repo.main("run", "--contract", str(contract), "--json"), live_run
    )
    assert live is not None, f"no open run with a seat appeared: {done.stderr}"
    assert live.run.open and live.attempts[0].state == AttemptState.RUNNING
    assert live.attempts[0].seats[0].state == SeatState.RUNNING
    assert live.coder_report is None and live.diff is None
    assert done.returncode == 0, done.stderr
    closed = views.run_view(ledger, live.run.run_id, state_dir=world_copy.state_dir)
    assert closed is not None and not closed.run.open
    assert [a.state for a in closed.attempts] == [AttemptState.PASS]
    assert (repo.root / "src" / "slug.py").read_text() == FIXED
    assert json.loads(done.stdout)["run_id"] == live.run.run_id


def test_a_firing_the_coder_erased_from_its_state_file_still_shows_fired(
    world_copy: World,
) -> None:
    path = world_copy.state_dir / f"{world_copy.halt_run}.json"
    state = json.loads(path.read_text())
    for halt in state["halts"]:
        if halt["name"] == "halt-scope-breach":
            halt.update(lifecycle="ARMED", evidence=None, fired_at=None)
    path.write_text(json.dumps(state))
    with world_copy.ledger() as ledger:
        run = views.run_view(ledger, world_copy.halt_run, state_dir=world_copy.state_dir)
        halts = views.halts_page(ledger, state_dir=world_copy.state_dir)
    assert run is not None
    breach = next(h for h in run.halts if h.name == "halt-scope-breach")
    assert breach.lifecycle == "FIRED" and breach.detail == world_copy.halt_evidence
    assert breach.rearm_command is not None
    assert [r.halt.name for r in halts.rows] == ["halt-scope-breach"]
