"""The gc planner: what a closed run's leftovers are, when they go, and what never goes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from assay.core.gc import (
    DEFAULT_RETENTION_SECONDS,
    DurationError,
    Leftover,
    RunFacts,
    format_duration,
    parse_duration,
    plan_gc,
)
from assay.core.vocab import LeftoverKind, RunStatus

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DAY = 86400
RUN = "r20260220-120000-abcdef"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0),
        ("0s", 0),
        ("45s", 45),
        ("30m", 1800),
        ("12h", 43200),
        ("7d", 7 * DAY),
        ("2w", 14 * DAY),
        (" 7D ", 7 * DAY),
    ],
)
def test_durations_read_as_seconds(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "7", "-1d", "1.5h", "7x", "d", "1d2h", "99999999999w"])
def test_anything_else_is_not_a_duration(text: str) -> None:
    with pytest.raises(DurationError, match=r"duration|100 years"):
        parse_duration(text)


def test_the_default_retention_is_seven_days_and_prints_as_written() -> None:
    assert DEFAULT_RETENTION_SECONDS == 7 * DAY
    assert [format_duration(s) for s in (0, 45, 1800, 3600, 7 * DAY, 90)] == [
        "0",
        "45s",
        "30m",
        "1h",
        "7d",
        "90s",
    ]


def _run(status: RunStatus = RunStatus.BLOCKED, closed_days_ago: float | None = 8, **more):  # type: ignore[no-untyped-def]
    closed = None if closed_days_ago is None else NOW - timedelta(days=closed_days_ago)
    return RunFacts(run_id=RUN, task_id="t1", status=status, closed_at=closed, **more)


def _seats(run_id: str | None = RUN) -> Leftover:
    return Leftover(kind=LeftoverKind.SEATS, target=f"/r/.assay/seats/{run_id}", run_id=run_id)


def _branch(seat: int = 1, **more) -> Leftover:  # type: ignore[no-untyped-def]
    target = f"assay/{RUN}/seat-{seat}"
    return Leftover(kind=LeftoverKind.BRANCH, target=target, run_id=RUN, commit="c0ffee", **more)


def _plan(found: list[Leftover], run: RunFacts | None, older_than: int = 7 * DAY):  # type: ignore[no-untyped-def]
    return plan_gc(found, {RUN: run} if run else {}, now=NOW, older_than=older_than)


def test_a_closed_runs_seats_and_branches_go_once_older_than_the_retention() -> None:
    plan = _plan([_branch(1), _seats(), _branch(2)], _run())
    # Folders first, then branches.
    assert [x.target for x in plan.remove] == [
        f"/r/.assay/seats/{RUN}",
        f"assay/{RUN}/seat-1",
        f"assay/{RUN}/seat-2",
    ]
    assert plan.skip == []


def test_within_the_retention_everything_stays_and_says_for_how_long() -> None:
    plan = _plan([_seats(), _branch()], _run(closed_days_ago=2))
    assert plan.remove == []
    assert [s.recent for s in plan.skip] == [True, True]
    assert plan.skip[0].reason == f"run {RUN} closed 2d ago; kept 5d more"
    assert _plan([_seats()], _run(closed_days_ago=0.001), older_than=0).remove == [_seats()]


@pytest.mark.parametrize(
    ("run", "reason"),
    [
        (_run(closed_days_ago=None, alive=True), "is running"),
        (_run(closed_days_ago=None), "is open and its process is gone: `assay run --resume`"),
        (_run(alive=True), "is closing (its process still holds its lock)"),
        (None, "no run r20260220-120000-abcdef in this ledger"),
    ],
    ids=["running", "open-dead", "closing", "unknown"],
)
def test_an_open_running_or_unknown_runs_leftovers_never_go(
    run: RunFacts | None, reason: str
) -> None:
    relay = Leftover(kind=LeftoverKind.RELAY, target="/tmp/assay-halt-x", run_id=RUN)
    found = [_seats(), _branch()] + ([relay] if run else [])
    plan = _plan(found, run, older_than=0)
    assert plan.remove == []
    assert all(reason in s.reason and not s.recent for s in plan.skip), plan.skip


@pytest.mark.parametrize("status", [RunStatus.READY, RunStatus.BLOCKED])
def test_the_branch_a_run_left_for_the_user_is_never_removed(status: RunStatus) -> None:
    run = _run(status=status, deliverable=f"assay/{RUN}/seat-2")
    plan = _plan([_branch(1), _branch(2), _seats()], run, older_than=0)
    assert [x.target for x in plan.remove] == [f"/r/.assay/seats/{RUN}", f"assay/{RUN}/seat-1"]
    [kept] = plan.skip
    assert kept.leftover.target == f"assay/{RUN}/seat-2"
    assert kept.reason == f"the branch run {RUN} left for you ({status.value}): yours"


def test_a_run_whose_payload_cannot_be_read_keeps_every_branch_but_loses_its_seats() -> None:
    run = _run(payload_problem="payload.json: No such file")
    plan = _plan([_branch(1), _seats()], run, older_than=0)
    assert plan.remove == [_seats()]
    assert "payload cannot be read (payload.json: No such file)" in plan.skip[0].reason


def test_a_checked_out_branch_is_skipped_unless_its_worktree_goes_first() -> None:
    out = _branch(1, checked_out_at="/home/me/review")
    plan = _plan([out], _run(), older_than=0)
    assert plan.remove == [] and plan.skip[0].reason == "checked out at /home/me/review"
    old = Leftover(kind=LeftoverKind.WORKTREES, target=f"/r/.assay/worktrees/{RUN}", run_id=RUN)
    legacy = _branch(2, checked_out_at=f"/r/.assay/worktrees/{RUN}/seat-2")
    plan = _plan([legacy, old], _run(), older_than=0)
    assert plan.remove == [old, legacy]


def test_a_relay_folder_of_a_closed_run_goes_whatever_its_age() -> None:
    relay = Leftover(kind=LeftoverKind.RELAY, target="/tmp/assay-halt-r-x", run_id=RUN)
    assert _plan([relay], _run(closed_days_ago=0.0001)).remove == [relay]


def test_a_relay_folder_no_run_of_this_ledger_owns_goes_only_when_silent_and_old() -> None:
    def relay(age: float, listening: bool = False) -> Leftover:
        made = NOW - timedelta(seconds=age)
        return Leftover(
            kind=LeftoverKind.RELAY,
            target=f"/tmp/assay-halt-other-{age}",
            run_id="r-other",
            modified_at=made,
            listening=listening,
        )

    stale, fresh, live = relay(2 * DAY), relay(10), relay(30 * DAY, listening=True)
    plan = _plan([stale, fresh, live], None, older_than=DAY)
    # The stale one goes; the others are another repository's business, not even reported.
    assert plan.remove == [stale] and plan.skip == []
    # With no retention a minute still protects one just made.
    assert _plan([fresh], None, older_than=0).remove == []
    assert _plan([relay(61)], None, older_than=0).remove == [relay(61)]
