"""gc over real runs (in-process, a real repository and ledger): the retention measured from
each run's close, the branch a run left on purpose, a moved branch, relay folders."""

from __future__ import annotations

import json
import socket
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.deep import deep_tree, remove_deep
from support.repo import CHECK_TESTS, Repo, git, make_repo

from assay.adapters import folders
from assay.adapters.store.sql import Ledger
from assay.core.contract import parse_contract
from assay.core.gc import Leftover
from assay.core.tasks import Task
from assay.core.vocab import EventKind, LeftoverKind
from assay.engine.local import halt_relay
from assay.engine.local.runner import run_task
from assay.engine.operations.gc import collect_garbage
from assay.engine.recovery.close import recover_interrupted

WEEK = 7 * 86400


def _run(repo: Repo, ledger: Ledger, fixture: str, *, land: str = "merge", keep: bool = False):  # type: ignore[no-untyped-def]
    contract = parse_contract(
        f"""task: Make slugify keep digits.
coder: {{kind: command, command: {json.dumps(repo.put(f"{fixture}.py", "src/slug.py"))}}}
validators: [{{id: tests, kind: command, run: "{CHECK_TESTS}"}}]
budgets: {{max_recovery: 0}}
sandbox: none
land: {land}
"""
    )
    now = datetime.now(UTC)
    task = Task.new(
        id=f"t{len(ledger.list_tasks())}", title="t", instruction=contract.task, now=now
    )
    ledger.add_task(task)
    home = repo.root / ".assay"
    return run_task(
        repo=repo.root, home=home, ledger=ledger, task=task, contract=contract, keep_worktrees=keep
    )


@pytest.fixture
def world(tmp_path: Path) -> tuple[Repo, Ledger]:
    repo = make_repo(tmp_path)
    home = repo.root / ".assay"
    home.mkdir()
    return repo, Ledger.open(f"sqlite:///{home / 'assay.db'}")


def _collect(repo: Repo, ledger: Ledger, days_later: float, **kwargs):  # type: ignore[no-untyped-def]
    return collect_garbage(
        repo=repo.root,
        home=repo.root / ".assay",
        ledger=ledger,
        older_than=kwargs.pop("older_than", WEEK),
        now=datetime.now(UTC) + timedelta(days=days_later),
        **kwargs,
    )


def _mine(items: list[Leftover]) -> list[Leftover]:
    """What is not a relay folder (another test's, on this machine's shared /tmp)."""
    return [x for x in items if x.kind is not LeftoverKind.RELAY]


def _branches(repo: Repo) -> list[str]:
    return git(repo.root, "branch", "--list", "--format=%(refname:short)", "assay/*").split()


def test_a_blocked_runs_branch_stays_a_week_from_its_close_then_goes(
    world: tuple[Repo, Ledger],
) -> None:
    repo, ledger = world
    report = _run(repo, ledger, "wrong")
    branch = f"assay/{report.run_id}/seat-1"
    assert _branches(repo) == [branch]
    early = _collect(repo, ledger, 6.9)
    assert _mine(early.removed) == []
    assert [s.recent for s in early.plan.skip if s.leftover.run_id == report.run_id] == [True]
    assert _branches(repo) == [branch]
    late = _collect(repo, ledger, 7.1)
    [removed] = _mine(late.removed)
    assert (removed.kind, removed.target) == (LeftoverKind.BRANCH, branch)
    assert removed.bytes is not None and removed.bytes > 0
    assert _branches(repo) == []
    [event] = [e for e in ledger.events(run_id=report.run_id) if e.kind == EventKind.RUN_GC]
    assert event.data["older_than"] == "7d"
    assert event.data["removed"] == [{"kind": "branch", "target": branch, "bytes": removed.bytes}]
    # Collected once: nothing left to do, nothing recorded again.
    assert _mine(_collect(repo, ledger, 30).removed) == []
    assert len([e for e in ledger.events(run_id=report.run_id) if e.kind == EventKind.RUN_GC]) == 1


def test_a_dry_run_removes_and_records_nothing(world: tuple[Repo, Ledger]) -> None:
    repo, ledger = world
    report = _run(repo, ledger, "wrong", keep=True)
    dry = _collect(repo, ledger, 8, dry_run=True)
    assert [x.kind for x in _mine(dry.removed)] == [LeftoverKind.SEATS, LeftoverKind.BRANCH]
    assert (repo.root / ".assay" / "seats" / report.run_id).is_dir()
    assert len(_branches(repo)) == 1
    assert [e for e in ledger.events() if e.kind == EventKind.RUN_GC] == []
    real = _collect(repo, ledger, 8)
    assert [x.kind for x in _mine(real.removed)] == [LeftoverKind.SEATS, LeftoverKind.BRANCH]
    assert not (repo.root / ".assay" / "seats").exists()  # no empty folder left either
    assert real.removed[0].bytes and real.removed[0].bytes > 1000  # a working copy's files


def test_the_branch_land_branch_left_is_the_users_forever(world: tuple[Repo, Ledger]) -> None:
    repo, ledger = world
    report = _run(repo, ledger, "fixed", land="branch")
    assert report.payload.status.value == "ready"
    branch = f"assay/{report.run_id}/seat-1"
    assert _branches(repo) == [branch]
    later = _collect(repo, ledger, 365, older_than=0)
    assert _mine(later.removed) == []
    assert [s.reason for s in later.plan.skip if s.leftover.run_id == report.run_id] == [
        f"the branch run {report.run_id} left for you (ready): yours"
    ]
    assert _branches(repo) == [branch]


def test_a_branch_moved_since_it_was_found_or_checked_out_stays(
    world: tuple[Repo, Ledger], tmp_path: Path
) -> None:
    repo, ledger = world
    first = _run(repo, ledger, "wrong")
    second = _run(repo, ledger, "wrong")
    checked = f"assay/{second.run_id}/seat-1"
    git(repo.root, "worktree", "add", "-q", str(tmp_path / "look"), checked)
    report = _collect(repo, ledger, 8)
    assert [s.reason for s in report.plan.skip if s.leftover.run_id == second.run_id] == [
        f"checked out at {tmp_path / 'look'}"
    ]
    assert _branches(repo) == [checked]
    # A branch that moved between the look and the removal is not deleted (compare-and-swap).
    third = _run(repo, ledger, "wrong")
    branch = f"assay/{third.run_id}/seat-1"
    from assay.adapters import leftovers

    [found] = [f for f in leftovers.find_branches(repo.root) if f.target == branch]
    git(repo.root, "branch", "-f", branch, "main")
    with pytest.raises(Exception, match="update-ref"):
        leftovers.remove(repo.root, found)
    assert branch in _branches(repo)
    assert first.run_id not in " ".join(_branches(repo))


def test_a_payload_that_cannot_be_read_keeps_the_runs_branches(
    world: tuple[Repo, Ledger],
) -> None:
    repo, ledger = world
    report = _run(repo, ledger, "wrong")
    assert report.payload_path is not None
    report.payload_path.write_text("{not json")
    later = _collect(repo, ledger, 30)
    assert _mine(later.removed) == []
    [skipped] = [s for s in later.plan.skip if s.leftover.run_id == report.run_id]
    assert "payload cannot be read" in skipped.reason
    assert len(_branches(repo)) == 1


def test_relay_folders_of_closed_runs_go_and_a_live_ones_stays(
    world: tuple[Repo, Ledger],
) -> None:
    repo, ledger = world
    report = _run(repo, ledger, "wrong")
    # What a killed run leaves: its relay folder, nobody listening any more.
    dead = Path(tempfile.mkdtemp(prefix=halt_relay.folder_prefix(report.run_id), dir="/tmp"))
    live = halt_relay.HaltRelay(
        dispatch_id="r20000101-000000-0000aa", state_dir=repo.root, armed={}, record=print
    )
    live.start()
    try:
        assert live.path is not None
        found = {f.path: f for f in halt_relay.relay_folders()}
        assert found[dead.resolve()].dispatch_id == report.run_id
        assert found[dead.resolve()].listening is False
        assert found[live.path.parent].listening is True
        collected = _collect(repo, ledger, 0, older_than=0)
        gone = [x.target for x in collected.removed if x.kind is LeftoverKind.RELAY]
        assert str(dead.resolve()) in gone and str(live.path.parent) not in gone
        assert not dead.exists() and live.path.exists()
    finally:
        live.close()
        if dead.exists():
            dead.rmdir()


def test_an_open_runs_seats_are_never_touched(world: tuple[Repo, Ledger]) -> None:
    repo, ledger = world
    now = datetime.now(UTC)
    task = Task.new(id="open", title="t", instruction="x", now=now)
    ledger.add_task(task)
    task.start(now, run_id="r20260101-000000-00000a")
    ledger.start_run(
        task, "r20260101-000000-00000a", dispatch_id="r20260101-000000-00000a", started_at=now
    )
    seat = repo.root / ".assay" / "seats" / "r20260101-000000-00000a" / "seat-1"
    seat.mkdir(parents=True)
    (seat / "work.py").write_text("x = 1\n")
    stray = repo.root / ".assay" / "seats" / "not-a-run"
    stray.mkdir()
    report = _collect(repo, ledger, 365, older_than=0)
    assert _mine(report.removed) == []
    reasons = sorted(
        s.reason for s in report.plan.skip if s.leftover.kind is not LeftoverKind.RELAY
    )
    assert reasons[0] == "no run not-a-run in this ledger"
    assert "is open and its process is gone" in reasons[1]
    assert seat.joinpath("work.py").is_file() and stray.is_dir()


def test_a_socket_nobody_listens_on_is_not_live(tmp_path: Path) -> None:
    path = tmp_path / "s"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.close()  # bound, then closed: the file stays, refusing connections
    assert halt_relay._listening(path) is False
    assert halt_relay._listening(tmp_path / "missing") is False


def test_a_seat_worktree_of_an_older_version_goes_and_then_its_branch(
    world: tuple[Repo, Ledger],
) -> None:
    repo, ledger = world
    report = _run(repo, ledger, "wrong")
    branch = f"assay/{report.run_id}/seat-1"
    old = repo.root / ".assay" / "worktrees" / report.run_id / "seat-1"
    git(repo.root, "worktree", "add", "-q", str(old), branch)  # how older versions seated
    collected = _collect(repo, ledger, 8)
    assert [x.kind for x in _mine(collected.removed)] == [
        LeftoverKind.WORKTREES,
        LeftoverKind.BRANCH,
    ]
    assert not (repo.root / ".assay" / "worktrees").exists()
    assert _branches(repo) == []
    assert str(old) not in git(repo.root, "worktree", "list")


# -- trees a coder shaped, and leftovers that cannot be removed ---------------------------------


def _stubborn(monkeypatch: pytest.MonkeyPatch, fails: Callable[[Path], bool]) -> None:
    """Removal fails, as on a folder made unremovable, for the roots ``fails`` picks: one
    entry inside stays, and the removal says so (the rest of what it is asked goes)."""
    real = folders.remove_tree

    def remove_tree(path: Path) -> folders.Removal:
        if not fails(Path(path)):
            return real(path)
        stuck = Path(path) / "seat-1" / "stuck"
        return folders.Removal(Path(path), [folders.NotRemoved(str(stuck), "Permission denied")])

    monkeypatch.setattr(folders, "remove_tree", remove_tree)


def test_a_seat_1100_folders_deep_is_measured_and_removed(world: tuple[Repo, Ledger]) -> None:
    repo, ledger = world
    report = _run(repo, ledger, "wrong", keep=True)
    seat = repo.root / ".assay" / "seats" / report.run_id / "seat-1"
    try:
        deep_tree(seat / "deep", 1_100)
        deep_tree(seat / ".git" / "deep", 1_100)
        collected = _collect(repo, ledger, 8)
        assert collected.failed == []
        assert [x.kind for x in _mine(collected.removed)] == [
            LeftoverKind.SEATS,
            LeftoverKind.BRANCH,
        ]
        assert not (repo.root / ".assay" / "seats").exists()
    finally:
        remove_deep(repo.root / ".assay" / "seats")


def test_a_leftover_gc_cannot_remove_is_said_and_the_rest_goes(
    world: tuple[Repo, Ledger], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, ledger = world
    stuck_run = _run(repo, ledger, "wrong", keep=True)
    other_run = _run(repo, ledger, "wrong", keep=True)
    seats_of = repo.root / ".assay" / "seats"
    _stubborn(monkeypatch, lambda path: path == seats_of / stuck_run.run_id)
    collected = _collect(repo, ledger, 8)
    [(failed, why)] = collected.failed
    assert (failed.kind, failed.target) == (LeftoverKind.SEATS, str(seats_of / stuck_run.run_id))
    assert why == f"{seats_of / stuck_run.run_id / 'seat-1' / 'stuck'}: Permission denied"
    removed = {(x.kind, x.run_id) for x in _mine(collected.removed)}
    assert removed == {
        (LeftoverKind.SEATS, other_run.run_id),
        (LeftoverKind.BRANCH, other_run.run_id),
        (LeftoverKind.BRANCH, stuck_run.run_id),
    }
    assert not (seats_of / other_run.run_id).exists() and _branches(repo) == []
    [listed] = collected.to_json()["failed"]
    assert (
        listed["target"] == str(seats_of / stuck_run.run_id)
        and "Permission denied" in (listed["error"])
    )


def test_a_seat_that_cannot_be_removed_at_close_is_a_warning_not_a_fault(
    world: tuple[Repo, Ledger], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, ledger = world
    _stubborn(monkeypatch, lambda path: path.parent.name == "seats")
    report = _run(repo, ledger, "fixed")
    assert report.payload.status.value == "merged"
    assert ledger.get_run(report.run_id).status.value == "merged"
    [warning] = [w for w in report.warnings if "not all removed" in w]
    stuck = repo.root / ".assay" / "seats" / report.run_id / "seat-1" / "stuck"
    assert f"{stuck}: Permission denied" in warning and "`assay gc` tries again" in warning


def test_recovery_says_a_seat_it_cannot_remove_and_goes_on(
    world: tuple[Repo, Ledger], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run whose process died closes, and the next one too, though the first's seats stay."""
    repo, ledger = world
    now = datetime.now(UTC)
    contract = parse_contract("task: t\ncoder: {kind: command, command: 'true'}\nsandbox: none\n")
    runs = ["r20260101-000000-00000a", "r20260101-000000-00000b"]
    for n, run_id in enumerate(runs):
        task = Task.new(id=f"dead{n}", title="t", instruction="x", now=now)
        ledger.add_task(task)
        task.start(now, run_id=run_id)
        ledger.start_run(task, run_id, dispatch_id=run_id, started_at=now)
        seat = repo.root / ".assay" / "seats" / run_id / "seat-1"
        seat.mkdir(parents=True)
        (seat / "work.py").write_text("x = 1\n")
        (repo.root / ".assay" / "runs" / run_id).mkdir(parents=True)  # this home's run
    seats_of = repo.root / ".assay" / "seats"
    _stubborn(monkeypatch, lambda path: path == seats_of / runs[0])
    said: list[str] = []
    recovered = recover_interrupted(
        repo=repo.root,
        home=repo.root / ".assay",
        ledger=ledger,
        contract_for=lambda _: contract,
        is_alive=lambda _: False,
        warn=said.append,
    )
    assert recovered == runs
    assert [ledger.get_run(r).open for r in runs] == [False, False]
    assert said == [
        f"run {runs[0]}: its seats were not all removed: "
        f"{seats_of / runs[0] / 'seat-1' / 'stuck'}: Permission denied"
    ]
    assert not (seats_of / runs[1]).exists()
