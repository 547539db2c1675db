"""`assay gc` and serve's periodic gc through the command (in-process), over real runs: the
retention, --dry-run, --json with sizes, what is never touched (a checked-out branch, the
account of every run), clear errors and exit codes. A run that is running while gc looks is
tests/e2e/cli/test_gc_e2e.py."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from support.repo import CHECK_TESTS, Repo, git, make_repo


def _contract(repo: Repo, fixture: str, *, before: str = "") -> Path:
    command = before + repo.put(f"{fixture}.py", "src/slug.py")
    return repo.contract(
        f"{fixture}.yaml",
        f"""task: Make slugify keep digits.
coder: {{kind: command, command: {json.dumps(command)}}}
validators: [{{id: tests, kind: command, run: "{CHECK_TESTS}"}}]
budgets: {{max_recovery: 0}}
""",
    )


def _blocked(repo: Repo, *flags: str) -> str:
    done = repo.main("run", "--contract", str(_contract(repo, "wrong")), "--json", *flags)
    assert done.returncode == 1, done.stderr
    return str(json.loads(done.stdout)["run_id"])


def _branches(repo: Repo) -> list[str]:
    return git(repo.root, "branch", "--list", "--format=%(refname:short)", "assay/*").split()


def _gc(repo: Repo, *args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    done = repo.main("gc", "--json", *args)
    return done.returncode, json.loads(done.stdout)


def _mine(items: list[dict], runs: list[str]) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    """(kind, target) of the items of these runs (not another test's relay folder in /tmp),
    sorted: two runs started in the same second have no order between them."""
    return sorted((i["kind"], i["target"]) for i in items if i["run_id"] in runs)


def test_gc_keeps_a_week_then_removes_seats_and_branches_and_never_the_account(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    blocked, kept = _blocked(repo), _blocked(repo, "--keep-worktrees")
    seats = repo.root / ".assay" / "seats"
    # The default retention (7 days) keeps what runs closed just now left.
    done = repo.main("gc")
    assert done.returncode == 0, done.stderr
    assert "kept 3 of runs closed less than 7d ago" in done.stdout
    assert (seats / kept / "seat-1").is_dir() and len(_branches(repo)) == 2
    # A dry run lists what would go, with sizes, and removes nothing.
    code, dry = _gc(repo, "--older-than", "0", "--dry-run")
    assert code == 0 and dry["dry_run"] is True and dry["older_than"] == "0"
    assert _mine(dry["removed"], [blocked, kept]) == sorted(
        [
            ("seats", str(seats / kept)),
            ("branch", f"assay/{blocked}/seat-1"),
            ("branch", f"assay/{kept}/seat-1"),
        ]
    )
    sizes = {i["target"]: i["bytes"] for i in dry["removed"] if i["run_id"] in (blocked, kept)}
    assert sizes[str(seats / kept)] > 1000  # the seat's working copy and .git
    assert all(sizes[f"assay/{r}/seat-1"] > 0 for r in (blocked, kept))
    assert (seats / kept / "seat-1").is_dir() and len(_branches(repo)) == 2
    # Then for real: the same list, all gone.
    code, real = _gc(repo, "--older-than", "0")
    assert code == 0, real
    assert _mine(real["removed"], [blocked, kept]) == _mine(dry["removed"], [blocked, kept])
    assert not seats.exists() and _branches(repo) == []
    assert real["bytes_removed"] == sum(i["bytes"] or 0 for i in real["removed"])
    assert {i["target"]: i["bytes"] for i in real["removed"] if i["target"] in sizes} == sizes
    # The account stays: payloads, run folders, halt state, the ledger (which says what gc did).
    for run in (blocked, kept):
        assert (repo.root / ".assay" / "runs" / run / "payload.json").is_file()
        assert (repo.root / ".assay" / "halt-state" / f"{run}.json").is_file()
        assert repo.main("payload", "show", run).returncode == 0
    with sqlite3.connect(repo.root / ".assay" / "assay.db") as db:
        events = db.execute("select run_id, data from events where kind = 'run.gc'").fetchall()
    assert sorted(r for r, _ in events) == sorted([blocked, kept])
    recorded = {r: json.loads(d) for r, d in events}
    assert [x["kind"] for x in recorded[kept]["removed"]] == ["seats", "branch"]
    # Nothing left: a second gc removes nothing.
    code, again = _gc(repo, "--older-than", "0")
    assert code == 0 and _mine(again["removed"], [blocked, kept]) == []


def test_a_checked_out_branch_is_kept_with_its_reason(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    run = _blocked(repo)
    look = tmp_path / "look"
    git(repo.root, "worktree", "add", "-q", str(look), f"assay/{run}/seat-1")
    done = repo.main("gc", "--older-than", "0")
    assert done.returncode == 0, done.stderr
    assert f"kept branch assay/{run}/seat-1: checked out at {look}" in done.stdout
    assert _branches(repo) == [f"assay/{run}/seat-1"]


def test_a_branch_that_cannot_be_removed_is_listed_and_exits_1(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    run = _blocked(repo)
    # Another git process holds the ref's lock: the deletion fails, the rest goes on.
    lock = repo.root / ".git" / "refs" / "heads" / "assay" / run / "seat-1.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    done = repo.main("gc", "--older-than", "0")
    assert done.returncode == 1, done.stdout
    assert f"could not remove branch assay/{run}/seat-1:" in done.stdout
    assert "1 could not be removed" in done.stdout
    lock.unlink()
    code, report = _gc(repo, "--older-than", "0")
    assert code == 0 and _mine(report["removed"], [run]) == [("branch", f"assay/{run}/seat-1")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["gc", "--older-than", "7"], "--older-than: '7' is not a duration"),
        (["gc", "--older-than", "soon"], "--older-than: 'soon' is not a duration"),
        (["serve", "--once", "--gc-every", "5x"], "--gc-every: '5x' is not a duration"),
        (["serve", "--once", "--gc-older-than", "-1d"], "--gc-older-than: '-1d' is not a"),
        (["worker", "--temporal", "x:1", "--gc-every", "5x"], "--gc-every: '5x' is not a"),
    ],
)
def test_a_bad_duration_exits_2_and_says_what_would_be_one(
    tmp_path: Path, args: list[str], message: str
) -> None:
    repo = make_repo(tmp_path)
    done = repo.main(*args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "(30m, 12h, 7d), or 0" in done.stderr
    assert "Traceback" not in done.stderr


def test_serve_collects_with_its_retention_and_not_when_told_never(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    run = _blocked(repo, "--keep-worktrees")
    seat = repo.root / ".assay" / "seats" / run
    off = repo.main("serve", "--once", "--poll", "0.1", "--gc-every", "0", "--gc-older-than", "0")
    assert off.returncode == 0, off.stderr
    assert seat.is_dir() and "gc:" not in off.stderr
    kept = repo.main("serve", "--once", "--poll", "0.1")  # 7 days: too young to go
    assert kept.returncode == 0 and seat.is_dir() and "gc:" not in kept.stderr
    served = repo.main("serve", "--once", "--poll", "0.1", "--gc-older-than", "0")
    assert served.returncode == 0, served.stderr
    assert not seat.exists() and _branches(repo) == []
    assert "gc: removed " in served.stderr
